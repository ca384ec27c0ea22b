package history_test

import (
	"testing"

	"github.com/acpcompact/acpcompact/history"
	"github.com/acpcompact/acpcompact/history/historytest"
)

func TestMemoryKeepsTheContract(t *testing.T) {
	historytest.Run(t, func(*testing.T) history.Store { return history.NewMemory() })
}
