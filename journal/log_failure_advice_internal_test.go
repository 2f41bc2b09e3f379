package journal

import (
	"context"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// A round whose log write failed, and the new segment meant to void it
// too, answers its writers with the round's fate: ErrMaybeCommitted when
// its bytes may be on disk (a failed fdatasync), a plain error when
// nothing reached the file (a full disk). The errors said what failed,
// not what to do: a caller told "may or may not be committed" and nothing
// more redid the payment under a new key (a duplicate charge if the first
// comes back), and one told "nothing was written" was not sent to the
// disk. Each now says what to do.
func TestLogWriteAndNewSegmentFailedSayWhatToDo(t *testing.T) {
	for _, tt := range []struct {
		name  string
		fault logFault
		maybe bool
		want  []string
	}{
		{"may be on disk", logFault{written: true, headers: 2}, true,
			[]string{"check the disk", "never redo the operation under a new key", "look the record up (Get) once a later write has succeeded or the journal was opened again"}},
		{"nothing written", logFault{headers: 2}, false,
			[]string{"nothing of this write was written", "check the disk", "then write again"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := rvOpen(t)
			tt.fault.install(s)
			_, err := s.Create(context.Background(), rvRecord("k", rvT0))
			require.ErrorIs(t, err, syscall.EIO)
			if tt.maybe {
				require.ErrorIs(t, err, ErrMaybeCommitted)
			} else {
				require.NotErrorIs(t, err, ErrMaybeCommitted)
			}
			for _, w := range tt.want {
				require.Contains(t, err.Error(), w)
			}
		})
	}
}
