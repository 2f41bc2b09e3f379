package journal

import (
	"encoding/binary"
	"hash/crc32"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// A release is rolled back because the newer one crashes; the newer one,
// killed, left writes in its log that this release cannot read (a record
// format version past recordVersion). Open refuses the journal, as it
// must (skipping them would lose operations the newer release journaled
// and may have sent), but said only "upgrade idem to read it" to an
// operator who had just rolled back: the service stayed down with no
// way named to start it. The error now says how: the newer release's
// idem compact, run once, copies its log into the file, and this release
// then opens the journal, leaving those records alone.
func TestNewerLogEntryRefusalSaysHowToRollBack(t *testing.T) {
	for _, newer := range []string{"record format", "log format"} {
		path := crashedJournal(t, createKeys(t, 1))
		seg, data := segmentData(t, path)
		// As the newer release would have written it: its version raised,
		// the CRC that covers it made good again.
		if newer == "record format" {
			entry := segHeaderSize + roundHeaderSize // the one entry
			payload := entry + entryHeaderSize
			data[payload+2] = recordVersion + 1
			size := int(binary.BigEndian.Uint32(data[entry+4:]))
			binary.BigEndian.PutUint32(data[entry:], crc32.Checksum(data[entry+4:payload+size], castagnoli))
		} else {
			binary.BigEndian.PutUint32(data[8:], logVersion+1)
			binary.BigEndian.PutUint32(data[48:], crc32.Checksum(data[:48], castagnoli))
		}
		require.NoError(t, os.WriteFile(seg, data, 0o600))

		_, err := Open(path)
		require.ErrorIs(t, err, ErrVersion, newer)
		require.Contains(t, err.Error(), newer+" version", "what is newer")
		require.Contains(t, err.Error(), "idem compact", "%s: the way to start the rolled-back release", newer)
	}

	// That the journal then opens, the newer records in its file skipped
	// by the scans and kept by prune and compact, is what the tests of
	// records from a newer idem show (newer_open_record_test.go,
	// compact_newer_record_test.go).
}
