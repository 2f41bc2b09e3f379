package journal_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
	"github.com/idemkit/idem/journal/journaltest"
)

// keyPageDamages returns pageDamages, for the first leaf of the key
// index, and one more that makes bbolt miss a key every time: every
// element's key (and value) points past the pages in use, into the
// file's unused tail, which is mapped and reads as zeros. (The table's
// "element offsets past the file" points past the file's end, where a
// read faults.)
func keyPageDamages() map[string]func(data []byte, off, pageSize int) []byte {
	out := make(map[string]func(data []byte, off, pageSize int) []byte)
	for name, damage := range pageDamages() {
		out[name] = damage
	}
	out["element offsets into the unused tail"] = func(data []byte, off, pageSize int) []byte {
		// One page of zeros past the end, as bbolt itself grows a file,
		// so that the tail is there whatever the file's size.
		tail := len(data)
		data = append(data, make([]byte, pageSize)...)
		p := data[off : off+pageSize]
		count := int(binary.LittleEndian.Uint16(p[10:12]))
		for i := range count {
			e := 16 + 16*i // leaf element: flags, pos, ksize, vsize
			if e+16 > len(p) {
				break
			}
			binary.LittleEndian.PutUint32(p[e+4:e+8], uint32(tail-off-e))
			binary.LittleEndian.PutUint32(p[e+8:e+12], 1) // ksize: a key of one zero byte
			binary.LittleEndian.PutUint32(p[e+12:e+16], 8)
		}
		return data
	}
	return out
}

// TestDamagedKeyPageHidesNoKey: promise 10, and the worst bug there is.
// A damaged leaf of the key index (the bucket that maps scope and key to
// a record) whose elements point off the page made bbolt's search compare
// the key sought with bytes that are not the page's keys, and miss a key
// the file holds. Create then believed the key absent and journaled a
// second record for an operation already taken on: a duplicate order.
// Every read that answers "absent" (Create's, Get's ErrNotFound, and
// those under Update, Claim, Confirm and Resolve) must instead say the
// journal is damaged, and nothing may be written.
func TestDamagedKeyPageHidesNoKey(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for name, damage := range keyPageDamages() {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			path := settledJournal(t, 3000)
			damageFirstLeaf(t, path, "keys", damage)
			before, err := os.ReadFile(path)
			require.NoError(t, err)

			s, err := journal.Open(path)
			require.NoError(t, err)
			// k00000 is open, k00001 settled; both are on the damaged page.
			calls := []struct {
				name string
				fn   func() error
			}{
				{"Create(open)", func() error {
					_, err := s.Create(ctx, journaltest.NewRecord("acct", "k00000", at))
					return err
				}},
				{"Create(settled)", func() error {
					_, err := s.Create(ctx, journaltest.NewRecord("acct", "k00001", at))
					return err
				}},
				{"CreateClaimed", func() error {
					_, _, err := s.CreateClaimed(ctx, journaltest.NewRecord("acct", "k00000", at), "me", at.Add(time.Minute))
					return err
				}},
				{"Get(open)", func() error {
					_, err := s.Get(ctx, "acct", "k00000")
					return err
				}},
				{"Get(settled)", func() error {
					_, err := s.Get(ctx, "acct", "k00001")
					return err
				}},
				{"Update", func() error {
					_, err := s.Update(ctx, "acct", "k00000", func(r *journal.Record) error {
						r.Review = "touched"
						return nil
					})
					return err
				}},
				{"Claim", func() error {
					_, _, err := s.Claim(ctx, "acct", "k00000", "me", at, at.Add(time.Minute))
					return err
				}},
				{"Confirm", func() error {
					_, err := s.Confirm(ctx, "acct", "k00000", journal.Confirmation{
						State: journal.StateSucceeded, Source: "hook", EventID: "ev1", At: at,
					})
					return err
				}},
				{"Resolve", func() error {
					_, err := s.Resolve(ctx, "acct", "k00000", journal.Manual{
						State: journal.StateFailed, Reason: "checked", By: "op", At: at,
					})
					return err
				}},
			}
			for _, c := range calls {
				for i := range 2 { // the second through a transaction begun afresh
					require.ErrorIs(t, failsClosed(c.fn), journal.ErrCorrupt, "%s, try %d, of a key on the damaged page", c.name, i+1)
				}
			}
			require.NoError(t, s.Close())

			after, err := os.ReadFile(path)
			require.NoError(t, err)
			require.True(t, bytes.Equal(before, after), "the journal was written: a record for a key it already holds")
		})
	}
}
