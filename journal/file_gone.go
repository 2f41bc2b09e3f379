package journal

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"runtime"
)

// fileGone returns why the Store must stop when its file is no longer the
// one at its path (removed, or another file renamed over it), or nil.
//
// The Store writes to the file it opened whatever happens to the path: a
// cleanup job's or a deploy script's rm, or a volume swapped under a
// container, left it journaling into a file nobody could open again. At
// the next start the journal was empty, and every operation still open in
// it (an "unknown" its caller was told idem would settle) was lost
// without a word. The file the process holds is still whole, and a copy
// of it made while the process runs saves it: the error says how.
//
// A Stat that fails for another reason than a missing file (a permission,
// an I/O error) proves nothing, and is not taken for a removal.
func (s *Store) fileGone() error {
	if s.abs == "" || s.id == nil || s.replaced.Load() {
		return nil
	}
	fi, err := os.Stat(s.abs)
	var how string
	switch {
	case err == nil && os.SameFile(fi, s.id):
		return nil
	case err == nil:
		how = "replaced (another file is at its path now)"
	case errors.Is(err, fs.ErrNotExist):
		how = "removed"
	default:
		return nil
	}
	save := "copy the file this process holds open back to that path before it stops"
	if runtime.GOOS == "linux" {
		save = fmt.Sprintf("copy it back while the process runs (cp /proc/%d/fd/%d %s; and its log, %s.log.*, from the process's open files if that is gone too), then restart",
			os.Getpid(), s.file.Fd(), s.abs, s.abs)
	}
	s.gone.Store(true)
	return withKind(ErrFileFailed, "the journal file %s was %s while this process had it open. It still holds every acknowledged write, "+
		"but nothing more is written to it, and it is lost when the process stops: %s", s.abs, how, save)
}
