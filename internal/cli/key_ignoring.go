package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/admin"
	"github.com/idemkit/idem/internal/errtext"
	"github.com/idemkit/idem/journal"
)

// KeyIgnoringBackend is a Backend that lists and removes the endpoints
// journaled as ignoring the idempotency key (idem.KeyIgnoringStore), for
// key-ignoring: the admin handler (-url), a Mode's journal. A Backend
// without it refuses the command.
type KeyIgnoringBackend interface {
	KeyIgnoringEndpoints(ctx context.Context) ([]string, error)
	// RemoveKeyIgnoring reports whether endpoint was known (an unknown
	// one may be an error that says so instead), and how many open
	// operations to it it flagged first (idem.RemoveKeyIgnoring), or -1
	// if it is not told.
	RemoveKeyIgnoring(ctx context.Context, endpoint string) (known bool, flagged int, err error)
}

const keyIgnoringHelp = `List the endpoints journaled as ignoring the idempotency key (an answer
said Idempotency-Status: ignored), or remove one. An operation to such an
endpoint whose answer is lost is flagged for review, never resent under
the same key; one learnt wrongly (a provider's incident, a proxy that added
the header) or that de-duplicates since stays until removed.

  key-ignoring [list] [-json]
      one endpoint a line, "METHOD URL" (no userinfo, query or fragment);
      -json prints {"endpoints": [...]}
  key-ignoring remove [-json] ENDPOINT
      ENDPOINT as list prints it, quoted ("POST https://api.example.com/v1/pay")
      or as two arguments; -json prints {"removed": ENDPOINT}. An unknown
      endpoint is an error (exit status 1). With -url, the running service
      forgets it in memory too; a process on the journal otherwise keeps it
      until it restarts (pgjournal replicas: each until restarted).

The open operations to the endpoint that may have executed are flagged "key
ignored" first: it kept no key for them, and a resend would charge again.
remove prints how many (not with -url: the handler does not say). They
stay flagged, and a process learns the endpoint from them again (at
Resume, a Run pass that reads them, its next start) and journals it again:
settle them (idem list -review, idem resolve) and remove it again.
After a rollback, while operations the newer idem wrote are open (idem
stats: "of them open"), remove is refused: it can neither read nor flag
them; remove the endpoint with the newer idem.`

func cmdKeyIgnoring(e *env, args []string) (err error) {
	const name = "key-ignoring"
	fs := e.flags(name)
	asJSON := fs.Bool("json", false, `print JSON: {"endpoints": [...]}, or {"removed": ENDPOINT}`)
	pos, err := e.parse(fs, args)
	if err != nil {
		return err
	}
	remove := false
	switch {
	case len(pos) == 0:
	case pos[0] == "list":
		if len(pos) > 1 {
			return usagef(name, "unexpected argument %q: list takes none", pos[1])
		}
	case pos[0] == "remove":
		remove = true
	default:
		return usagef(name, "unknown subcommand %q: want list or remove", pos[0])
	}
	var endpoint string
	if remove {
		switch len(pos) {
		case 1:
			return usagef(name, "no endpoint given: pass one as list prints it, such as \"POST https://api.example.com/v1/pay\"")
		case 2, 3:
			endpoint = strings.Join(pos[1:], " ")
		default:
			return usagef(name, "one endpoint expected (METHOD URL), got %d arguments", len(pos)-1)
		}
		if strings.TrimSpace(endpoint) == "" {
			return usagef(name, "empty endpoint")
		}
	}

	kb, closeKB, err := e.keyIgnoringBackend(name, remove)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := closeKB(); cerr != nil && err == nil {
			err = cerr
		}
	}()
	if !remove {
		es, err := kb.KeyIgnoringEndpoints(e.ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(e.stdout, admin.KeyIgnoring{Endpoints: append([]string{}, es...)})
		}
		if len(es) == 0 {
			fmt.Fprintln(e.stderr, "idem: no endpoint is journaled as ignoring the idempotency key")
			return nil
		}
		fmt.Fprintln(e.stdout, "ENDPOINT")
		for _, ep := range es {
			fmt.Fprintln(e.stdout, clean(ep))
		}
		return nil
	}
	known, flagged, err := kb.RemoveKeyIgnoring(e.ctx, endpoint)
	if err != nil {
		return err
	}
	if !known {
		msg := admin.NoKeyIgnoringEndpoint(endpoint)
		if flagged > 0 {
			// Not kept (its save was lost, or the file predates them),
			// but an open operation flagged for it teaches it: what else
			// may have executed there was flagged.
			msg += fmt.Sprintf("\nhint: the journal does not keep it, but an open operation flagged \"key ignored\" for it makes it known: %d more open operation(s) to it that may have executed were flagged \"key ignored\" (never resent): settle them (idem list -review)", flagged)
		}
		return errors.New(msg)
	}
	// The removal is journaled: a lost answer must not pass for one that
	// failed, nor hide how many operations it flagged.
	done := "removed " + clean(endpoint)
	if flagged >= 0 {
		done += fmt.Sprintf(` (flagged %d open operation(s) to it "key ignored")`, flagged)
	}
	done += "; the removal is journaled"
	if *asJSON {
		_ = writeJSON(e.stdout, admin.RemoveKeyIgnoringAnswer{Removed: endpoint}) // its error is stdout's, which printed reports
		return e.printed(done)
	}
	fmt.Fprintf(e.stdout, "removed %s: an operation to it whose answer is lost is resent under the same key again\n", clean(endpoint))
	what := `the open operations to it that may have executed are flagged "key ignored"`
	if flagged >= 0 {
		what = fmt.Sprintf(`flagged %d open operation(s) to it that may have executed "key ignored"`, flagged)
	}
	// Those flagged earlier teach it again as well: the note is due
	// whatever this removal flagged.
	fmt.Fprintf(e.stdout, "note: %s (never resent); until settled, each operation so flagged teaches it again (at Resume, a Run pass that reads them, a process's next start): settle them (idem list -review)\n", what)
	return e.printed(done)
}

// keyIgnoringBackend returns what key-ignoring runs on: the backend, or
// the journal file (read-only unless write), and how to close it.
func (e *env) keyIgnoringBackend(cmd string, write bool) (KeyIgnoringBackend, func() error, error) {
	b, err := e.backend(cmd)
	if err != nil {
		return nil, nil, err
	}
	if b != nil {
		kb, ok := b.(KeyIgnoringBackend)
		if !ok {
			_ = b.Close()
			return nil, nil, usagef(cmd, "%s works with -journal or -url only, not with %s", cmd, e.activeMode().Name)
		}
		return kb, b.Close, nil
	}
	s, err := e.open(cmd, write)
	if err != nil {
		return nil, nil, err
	}
	return fileKeyIgnoring{s: s}, s.Close, nil
}

// fileKeyIgnoring is key-ignoring on a journal file, its errors explained.
type fileKeyIgnoring struct {
	s *journal.Store
}

func (f fileKeyIgnoring) KeyIgnoringEndpoints(ctx context.Context) ([]string, error) {
	es, err := f.s.KeyIgnoringEndpoints(ctx)
	if err != nil {
		return nil, explain(f.s.Path(), err)
	}
	return es, nil
}

func (f fileKeyIgnoring) RemoveKeyIgnoring(ctx context.Context, endpoint string) (bool, int, error) {
	// The operations that may have executed there are flagged first
	// (idem.RemoveKeyIgnoring): the next process, which no longer knows
	// the endpoint, would resend them.
	known, flagged, err := idem.RemoveKeyIgnoring(ctx, f.s, endpoint)
	if err != nil {
		// The command's own "idem: " comes first.
		return false, flagged, explain(f.s.Path(), errtext.Errorf("idem: ", "%w", err))
	}
	return known, flagged, nil
}

var _ KeyIgnoringBackend = (*remote)(nil)

// KeyIgnoringEndpoints lists the endpoints the service's Client takes to
// ignore the key.
func (r *remote) KeyIgnoringEndpoints(ctx context.Context) ([]string, error) {
	var ans admin.KeyIgnoring
	if err := r.call(ctx, http.MethodGet, "key-ignoring", nil, nil, "endpoints", &ans); err != nil {
		return nil, err
	}
	return ans.Endpoints, nil
}

// RemoveKeyIgnoring has the service's Client forget endpoint, in its
// journal and in memory; an unknown one is the handler's 404, which says
// so. The handler's answer does not tell how many operations it flagged.
func (r *remote) RemoveKeyIgnoring(ctx context.Context, endpoint string) (bool, int, error) {
	var ans admin.RemoveKeyIgnoringAnswer
	if err := r.call(ctx, http.MethodPost, "key-ignoring/remove", nil, admin.RemoveKeyIgnoringRequest{Endpoint: endpoint}, "removed", &ans); err != nil {
		return false, -1, err
	}
	return true, -1, nil
}
