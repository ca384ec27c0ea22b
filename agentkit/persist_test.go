package agentkit_test

import (
	"testing"

	"github.com/acpcompact/acpcompact/agentkit/internal/kittest"
	"github.com/acpcompact/acpcompact/sessionlog"
	"github.com/stretchr/testify/require"
)

func TestHistoryReplaysWhatTheClientSaw(t *testing.T) {
	for name, open := range kittest.Stores() {
		for _, capable := range []bool{true, false} {
			t.Run(name+map[bool]string{true: "/capable", false: "/fallback"}[capable], func(t *testing.T) {
				kittest.HistoryReplaysWhatTheClientSaw(t, stack{}, open(t), capable)
			})
		}
	}
}

func TestStoreFailuresKeepLiveAndReplayAgreeing(t *testing.T) {
	s, err := sessionlog.Open(t.TempDir())
	require.NoError(t, err)
	kittest.StoreFailuresKeepLiveAndReplayAgreeing(t, stack{}, s.History())
}

func TestKeptDataIsHandedBackInItsPlace(t *testing.T) {
	s, err := sessionlog.Open(t.TempDir())
	require.NoError(t, err)
	kittest.KeptDataIsHandedBackInItsPlace(t, stack{}, s.History())
}

func TestRecordWithoutAConnectionIsReplayedOnTheNextLoad(t *testing.T) {
	s, err := sessionlog.Open(t.TempDir())
	require.NoError(t, err)
	kittest.RecordWithoutAConnectionIsReplayedOnTheNextLoad(t, stack{}, s.History())
}
