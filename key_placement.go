package idem

import (
	"fmt"
	"strings"

	"github.com/idemkit/idem/journal"
)

// placementOf is journal.Record.KeyPlacement for a Client that sends the
// key in header (canonical; empty: in the body) in format.
func placementOf(header string, format KeyFormat) string {
	switch {
	case header == "":
		return "body"
	case format == KeyQuoted:
		return "header " + header + " quoted"
	}
	return "header " + header
}

// placementWords says where placement puts the key, for people.
func placementWords(placement string) string {
	if placement == "body" {
		return "in the body (WithKeyInBody)"
	}
	name, quoted := strings.CutSuffix(strings.TrimPrefix(placement, "header "), " quoted")
	if quoted {
		return "in header " + name + " as a quoted string (WithKeyHeader(" + fmt.Sprintf("%q", name) + ", idem.KeyQuoted))"
	}
	return "in header " + name + " (WithKeyHeader(" + fmt.Sprintf("%q", name) + ", idem.KeyBare))"
}

// keyMovedBlock blocks every send of rec by a Client that puts the key
// elsewhere than the Client that journaled it: a deploy that renamed the
// key's header (Idempotency-Key to PayPal-Request-Id) or changed its
// form, a replica still on the other settings, another service sharing
// the journal. The server would read the resend under another key, or
// none, and execute it again. A record journaled before placements were
// (empty) is judged as before, by the key's presence in its body alone.
func (c *Client) keyMovedBlock(placement string) *blocked {
	if placement == "" || placement == c.cfg.keyPlacement {
		return nil
	}
	return &blocked{ReviewKeyMoved, fmt.Errorf("idem: %w: %w: the operation was journaled with its key %s, and this Client puts it %s: "+
		"a send would reach the server under another key, or none, and could execute again; "+
		"drive it (Do, Resume, Run) with a Client configured as it was journaled until it settles, or settle it by hand (Resolve)",
		ErrInvalidRequest, ErrNeedsReview, placementWords(placement), placementWords(c.cfg.keyPlacement))}
}

// movedHere reports whether rec is flagged only because a Client that
// puts the key elsewhere visited it (ReviewKeyMoved, which replaces no
// other reason: reviewAfter), and this Client puts it where rec was
// journaled. The flag speaks of that Client, not of the operation: held
// to queries here, an outbox's operation (PrepareTx) a replica on the
// other settings visited during a rolling deploy would never be sent
// by any Run, and one that may have executed, with no result endpoint,
// never settled.
func (c *Client) movedHere(rec *journal.Record) bool {
	return rec.Review == ReviewKeyMoved && rec.KeyPlacement == c.cfg.keyPlacement
}
