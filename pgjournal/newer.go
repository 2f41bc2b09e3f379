package pgjournal

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/idemkit/idem/journal"
)

// newestVersion is the parameter of notNewerSQL: the newest record
// encoding this build reads, as the byte the encoding stores it in.
var newestVersion = []byte{journal.RecordVersion}

// notNewerSQL is a condition that leaves out the records written by a
// newer idem (a rollback left them): their data begins with the magic
// bytes and a version byte above newestVersion, parameter $n. Due and
// ClaimDue leave them out in the query, so that such a record takes no
// place in their limit (a due record behind it would wait for good) and
// ClaimDue's transaction, which a record it cannot decode rolls back,
// never meets one. A damaged record stays in, to fail as damaged. The
// magic bytes are decoded from hex rather than written '\xe1de': a
// database with standard_conforming_strings off reads that backslash as
// an escape, and a UTF-8 one then refuses the literal, failing every scan.
func notNewerSQL(n int) string {
	return fmt.Sprintf(`(substring(data from 1 for 2) <> decode('e1de', 'hex') OR substring(data from 3 for 1) <= $%d::bytea)`, n)
}

// skippedNewer logs, through WithLogger's logger, an open record written
// by a newer idem that a scan skipped, once per record and Store.
func (s *Store) skippedNewer(ctx context.Context, scope, key string) {
	if s.logger == nil {
		return
	}
	if _, told := s.toldNewer.LoadOrStore([2]string{scope, key}, true); told {
		return
	}
	s.logger.LogAttrs(ctx, slog.LevelWarn, "pgjournal: an open record was written by a newer idem, which this build cannot read: "+
		"skipped (nothing sent or settled for it) until that idem runs on this journal again",
		slog.String("scope", scope), slog.String("key", key), slog.String("schema", s.schema))
}
