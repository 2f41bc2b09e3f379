package journal

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A seal is written after the last round of a full segment and synced on
// its own, once the next segment's header is durable: a process killed
// (or a disk that filled, or failed the seal's fdatasync) in between
// leaves it torn or damaged. That is no seal, as in a release without
// seals: the journal opens, every acknowledged write there, and it is not
// taken for damage to acknowledged writes (ErrCorrupt), the rounds before
// it being whole.
func TestTornSealIsNoSeal(t *testing.T) {
	for _, tc := range []struct {
		name string
		tear func(data []byte, at int) []byte
	}{
		{"intact", func(data []byte, _ int) []byte { return data }},
		{"cut short", func(data []byte, at int) []byte { return data[:at+sealSize/2] }},
		{"checksum", func(data []byte, at int) []byte { data[at+4] ^= 0xff; return data }},
		{"next start", func(data []byte, at int) []byte { data[at+sealSize-1]++; return data }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			path := filepath.Join(t.TempDir(), "j.db")
			s, err := Open(path, withApplyDelay(time.Hour), withOverlayMax(64<<10))
			require.NoError(t, err)
			var keys []string
			for i := 0; len(segmentsOf(t, path)) < 2; i++ {
				r := rvRecord(fmt.Sprint("k", i), rvT0)
				r.Body = []byte(`{"order":"` + r.Key + `","pad":"` + strings.Repeat("p", 8<<10) + `"}`)
				r.BodySHA = sha256.Sum256(r.Body)
				_, err := s.Create(ctx, r)
				require.NoError(t, err)
				keys = append(keys, r.Key)
			}
			s.crash(t)
			segs := segmentsOf(t, path)
			data, err := os.ReadFile(segs[0])
			require.NoError(t, err)
			h, err := parseSegHeader(data)
			require.NoError(t, err)
			at := len(data) - sealSize
			require.NotZero(t, sealAt(data[at:], &h.id), "the full segment's seal")
			require.NoError(t, os.WriteFile(segs[0], tc.tear(data, at), 0o600))

			s, err = Open(path)
			require.NoError(t, err)
			for _, k := range keys {
				_, err := s.Get(ctx, "s", k)
				require.NoError(t, err, k)
			}
			require.NoError(t, s.Close())
		})
	}
}
