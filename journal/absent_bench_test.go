package journal

import (
	"fmt"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// BenchmarkLookupMiss is the file's part of a Create of a new key: the
// look into the key index of a journal of 20,000 records, through a
// getter as the committer's kept transaction reads it. "search" is
// bbolt's search alone, "vetted" the whole lookup with vetMiss's second
// search of the pages the first one read.
func BenchmarkLookupMiss(b *testing.B) {
	s, _ := absentJournal(b, 20000, func(int) int { return 24 })
	missing := make([][]byte, 1024)
	for i := range missing {
		missing[i] = recordKey("s", fmt.Sprintf("%06d-zz-%d", i*19, i))
	}
	for _, name := range []string{"search", "vetted"} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			err := s.db.View(func(tx *bolt.Tx) error {
				var g getter
				keys := g.bucket(tx, bucketKeys)
				i := 0
				for b.Loop() {
					rk := missing[i%len(missing)]
					i++
					if name == "search" {
						if v, err := g.get(tx, keys, rk); v != nil || err != nil {
							b.Fatal("found", err)
						}
						continue
					}
					if _, v, err := g.lookup(tx, rk); v != nil || err != nil {
						b.Fatal(v, err)
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
		})
	}
}
