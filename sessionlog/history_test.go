package sessionlog_test

import (
	"testing"

	"github.com/acpcompact/acpcompact/history"
	"github.com/acpcompact/acpcompact/history/historytest"
	"github.com/acpcompact/acpcompact/sessionlog"
	"github.com/stretchr/testify/require"
)

func TestStoreKeepsTheHistoryContract(t *testing.T) {
	historytest.Run(t, func(t *testing.T) history.Store {
		s, err := sessionlog.Open(t.TempDir())
		require.NoError(t, err)
		return s.History()
	})
}
