package journal_test

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/idemkit/idem/journal"
)

// A service creates its journal at its first start and insists on finding
// it at every later one, so that a volume not mounted is an error rather
// than a fresh, empty journal.
func ExampleMustExist() {
	dir, err := os.MkdirTemp("", "idem-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "payments.journal")

	first, err := journal.Open(path) // the first start: created, 0600
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = first.Close()

	later, err := journal.Open(path, journal.MustExist())
	fmt.Println("later start:", err)
	if err == nil {
		_ = later.Close()
	}

	// The mount point of a volume that is not mounted: an empty directory.
	mnt := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		fmt.Println(err)
		return
	}
	_, err = journal.Open(filepath.Join(mnt, "payments.journal"), journal.MustExist())
	fmt.Println("volume missing:", errors.Is(err, fs.ErrNotExist))
	// Output:
	// later start: <nil>
	// volume missing: true
}
