package idem

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/idemkit/idem/journal"
)

// What an answer means is decided here, by pure functions of what the
// journal says came before and of one exchange: no I/O, no clock, no
// configuration but what is passed in. The driver (loop.go, attempt.go)
// sends, commits and waits around them. decide_test.go is the outcome
// table of the package documentation, row by row.

// past is what a record's earlier attempts tell the judge.
type past struct {
	// maybeExecuted: some submit may have reached the server without an
	// answer saying it did not execute. Only then can the server hold a
	// result of ours for the key.
	maybeExecuted bool
	// refusals: 4xx refusals answered since the first attempt that may
	// have executed, and 2xx ones (an envelope's duplicate id, read as a
	// 4xx's); they cannot all be a gateway's passing trouble. Not reset
	// by a later maybe-executed answer (a 503 between refusals).
	refusals int
	// final: the server answered with its stored response for the key
	// (a replay). Resending the same key can never change that answer.
	final bool
	// contested: the server said the key was in flight (409) before
	// anything of ours could have executed, so another request holds it.
	// What the server stores for the key from then on may be that
	// request's: a result read by key, or replayed, is not proof of ours.
	contested bool
	// held: the resource the server said it made for the key and holds,
	// unfinished (the journaled processing answer's), or "".
	held string
	// heldOwn: held was named by an answer to our own request, not by a
	// replay of what the server stored for the key (perhaps another
	// request's).
	heldOwn bool
	// copyClaimed: a first attempt's 409 from an endpoint that ignores the
	// key said the order exists, was paid or runs (copyClaimed): what the
	// result endpoint finds for the order may be another request's.
	copyClaimed bool
	// orderPaid: an attempt before which nothing of ours may have
	// executed was refused "order already paid", or a create "order
	// already exists", by a server that keeps the key (orderPaidMeaning):
	// the result endpoint's "not found" for the key, once past the lag,
	// fails it while the server keeps the key (orderPaidNotFoundWithin).
	orderPaid bool
}

// pastOf reads a record's attempts numbered below before.
func pastOf(rec *journal.Record, before int) past {
	var p past
	if rec.State == journal.StateProcessing && rec.Result != nil {
		p.held, p.heldOwn = rec.Result.ResourceID, !rec.Result.Replayed
	}
	for _, a := range rec.Attempts {
		if a.Number < before {
			p = p.after(a)
		}
	}
	return p
}

// after is p with attempt a read too.
func (p past) after(a journal.Attempt) past {
	if a.Kind != journal.AttemptSubmit {
		return p
	}
	if strings.HasPrefix(a.Err, copyClaimedWords) {
		p.copyClaimed = true
	}
	if _, ok := orderHeldOf(a.Err); ok {
		p.orderPaid = true
	}
	switch {
	case maybeExecuted(a):
		p.maybeExecuted = true
	case contesting(a, p):
		p.contested = true
	case p.maybeExecuted && a.Refused && a.Status >= 400 && a.Status < 500 && a.Status != http.StatusConflict && a.Status != http.StatusTooManyRequests &&
		!strings.HasPrefix(a.Err, inFlightAfterSend),
		p.maybeExecuted && a.Refused && a.Status == http.StatusConflict &&
			(strings.HasPrefix(a.Err, conflictAfterSend) || strings.HasPrefix(a.Err, stateAfterSend)),
		p.maybeExecuted && a.Refused && a.Status >= 200 && a.Status < 300 && !a.Replayed && a.Err == "":
		// A 409 refuses only when it said the key was used (its Err,
		// refusedAfterMaybeSent's): one saying the key's request still
		// runs asks for a wait, however long, and so does a 422 or 400
		// saying so (its Err, inFlightAfterSend). A replay whose body was
		// cut in transit is journaled refused and not replayed too, with
		// the read's error: the stored answer never arrived, and it
		// refuses nothing.
		p.refusals++
	}
	if a.Replayed {
		p.final = true
	}
	return p
}

// contesting reports whether a, coming after p, says another request holds
// the key: a 409 before anything of ours may have executed.
func contesting(a journal.Attempt, p past) bool {
	return a.Kind == journal.AttemptSubmit && a.Refused && a.Status == http.StatusConflict && !a.Replayed && !p.maybeExecuted
}

// maybeExecuted is the one test of whether an attempt may have executed on
// the server: it may have been written (or has no recorded outcome: the
// process stopped mid-attempt) and no answer said it did not execute.
// pastOf, compactAttempts and the journal's ApplyConfirmation share it so
// that they can never disagree.
func maybeExecuted(a journal.Attempt) bool { return a.MaybeExecuted() }

// answer is one exchange as the judge sees it. The driver fills it in:
// the classifier's verdict, the decoder's outcome for a 2xx.
type answer struct {
	status   int
	unsent   bool // surely never sent (no connection ever took it)
	resent   bool // net/http began another copy after one that may have executed (attemptTrace.resent)
	cut      bool // the body was not read whole (a read error)
	tooLarge bool // the body passed the cap: whole, but only its start kept
	replayed bool // marked as the stored answer (Idempotent-Replayed: true, …)
	// created: a refusal that names the resource the key already created
	// (createdResource: GoCardless's, Primer's, Banking Circle's,
	// Moov's), the server's final word for the key as a replay is; empty
	// for any other answer. createdStatus: that resource's status, when
	// the answer gives it. actedOn: the resource named is one the
	// request's path names, the one it acted on (a refund's payment),
	// not one its key made: the key's request was processed, and its
	// status is that resource's, not the request's outcome.
	created, createdStatus string
	actedOn                bool
	// redirect: where a router's redirect points (routerRedirect), which
	// no handler ran for; empty for any other answer.
	redirect string
	// location: a 3xx's Location, for the attempt's error (notFollowed).
	location string
	// otherCache: a result query's answer came out of a cache (what
	// fromCache says) and does not name the key: a cache keyed on less
	// than the URL (CDNs leave the query string out unless told) serves
	// one key's answer to a query for any, so it may be another key's.
	// Set only with cached, which says how it came.
	otherCache bool
	// cached: a result query's answer came out of a cache (what
	// fromCache says), whether or not it names the key; "" otherwise.
	cached  string
	verdict Verdict
	// keyConflict: a Conflict verdict is about the key (a status set with
	// WithKeyConflictStatus, or a body that names the idempotency key),
	// not a validation error that happens to be 422; or a 400 says the
	// key was used with other parameters (reusesKey).
	keyConflict bool
	// differs: a keyConflict answer says the request is not the one the
	// key was first used with (saysRequestDiffers), or its status was
	// given to WithKeyConflictStatus, whose doc says as much. Without it
	// the server said only that the key was used: a server that never
	// replays says so to a copy of this very request.
	differs bool
	// inFlight: a refusal other than a 409 says the key's request, or
	// the order or payment the request makes, is still running or ran
	// (refusalInFlight): not this one's merits.
	inFlight bool
	// versionMoved: a 409 refuses the version of the resource the update
	// carries (versionConflict), or a 412 its precondition on the version
	// (conditionalUpdate): the resource changed since the update was
	// built, by another writer or by a copy of this update.
	versionMoved bool
	// keyIgnored: the server says it does not de-duplicate by the key
	// where this went (keyIgnored): a resend is a second request.
	keyIgnored bool
	// copyRuns, copyMade: a 409 marked keyIgnored whose words say the
	// order's payment runs (saysSubjectRunning), or that the order
	// exists, is a duplicate or was paid (duplicateWords): what they
	// refer to may be a copy of this request (copyClaimed).
	copyRuns, copyMade bool
	// orderPaid: a refusal of a payment from an endpoint that keeps the
	// key in a header says the order is paid already, and nothing of the
	// key (paidRefusal): the order's state, whoever paid it. orderExists:
	// it is a 409 saying the order a create makes exists already.
	orderPaid, orderExists bool
	// foundOrder: with the key in the request's body, a result query's
	// 2xx the decoder could not read names the key as a member's value
	// (foundOrder): the order exists.
	foundOrder bool
	// otherMissing: a result query's answer says something else it named
	// does not exist (missingOther: the merchant, the API key), nothing
	// the operation's URL names.
	otherMissing bool
	// morePages: a result query's 2xx that proves nothing is one page of
	// a list or search that says more follow (morePages): not holding
	// the key, it is no "not found".
	morePages bool
	// otherRequest: a result query's 2xx, or a refusal naming the
	// resource the key created (created), describes a request other
	// than the journaled one (otherRequest): how, for the attempt's
	// error.
	otherRequest string
	// otherFixed: among what differs is a member no amendment changes
	// (amendable): the answer is another order's, held or not.
	otherFixed bool
	// envelopeRefusal: with the key in the request's body, a submit's
	// 2xx whose envelope carries an error (carriesError) and which the
	// decoder read as failed: an API that answers its refusals 200 OK
	// refusing this copy, weighed after a send that may have executed as
	// a 4xx refusal is.
	envelopeRefusal bool
	body            []byte
	out             Outcome // what the decoder read from a 2xx
	decodeErr       error   // why a 2xx proves nothing; nil when out is valid
}

// move is what the driver does next.
type move int

const (
	// moveSettle: the operation is succeeded or failed (judgment.out).
	moveSettle move = iota + 1
	// moveProcessing: the server holds it, unfinished: wait, then ask.
	moveProcessing
	// moveQuery: it may have executed: query, then resend the same key.
	moveQuery
	// moveResend: this attempt did not execute: wait, resend the same key.
	moveResend
	// moveReview: only a person can settle it; nothing is resent.
	moveReview
	// moveInconclusive: a result query told nothing (notFound says how).
	moveInconclusive
)

// judgment is what one exchange means.
type judgment struct {
	move  move
	label string // the log's outcome attribute: stable names
	// refused: the answer says this attempt did not execute, whatever
	// earlier attempts did. Journaled with the attempt (pastOf).
	refused  bool
	out      Outcome // moveSettle: the terminal outcome; moveProcessing: what is known
	review   string  // moveReview: why, for people; moveSettle: a flag kept beside the outcome
	conflict bool    // the key is someone else's, or was used with another body
	notFound bool    // moveInconclusive: the result endpoint said 404
	// failed: moveInconclusive, and the result endpoint said nothing of
	// the operation (queryFailed): not that it is missing, nor a
	// search's answer that does not name it.
	failed bool
	// awaits: moveReview of an answer saying a payment runs that may be
	// this request's (copyClaimed): the result endpoint is asked until
	// the call's budget ends, its "not found" no answer yet, as for a
	// request in flight; nothing is resent.
	awaits bool
	err    error // what to record on the attempt (a decode error)
}

// maxRefusalsAfterSend bounds the resends answered with a refusal after an
// attempt that may have executed. One refusal may be a gateway's or an
// expired credential's; several in a row are the server's own answer for
// the key, and resending until the reconciliation deadline changes nothing.
const maxRefusalsAfterSend = 3

// conflictAfterSend begins the journaled error of a 409 that refused
// after an attempt that may have executed (refusedAfterMaybeSent), which
// pastOf counts among the refusals.
const conflictAfterSend = "idem: a 409 saying the key was used, after a send that may have executed"

// stateAfterSend begins the journaled error of a 409 refusing the request
// for the state of the object it acts on (objectStateRefusal) or for its
// values (badValueRefusal: Klarna's BAD_VALUE, Affirm's capture amounts),
// after an attempt that may have executed: counted among the refusals as
// conflictAfterSend's is, in words that do not say the key was used (the
// words are journaled and read back: keep them as written).
const stateAfterSend = "idem: a 409 refusing the request for its object's state, after a send that may have executed"

// inFlightAfterSend begins the journaled error of a refusal saying the
// key's request still runs (a 422 or 400: Adyen's 704, PayPal's
// PREVIOUS_REQUEST_IN_PROGRESS, DynamoDB's TransactionInProgressException;
// a 2xx the decoder read as failed that says so, Shopify's
// IDEMPOTENCY_CONCURRENT_REQUEST; or a 4xx a Classifier reads as
// Processing) after an attempt that may have executed: a wait for ours,
// which pastOf does not count among the refusals that leave an operation
// for a person.
const inFlightAfterSend = "idem: the key's request still runs, after a send that may have executed"

// inFlightOurs is the judgment of an answer saying the key's request
// still runs, after an attempt that may have executed: ours, waited for.
func inFlightOurs(a answer) judgment {
	j := judgment{move: moveProcessing, label: "in_flight", refused: true}
	if a.status != http.StatusConflict {
		// A 409 is never counted: it needs no mark.
		j.err = fmt.Errorf("%s: %s", inFlightAfterSend, refusalReason(a))
	}
	return j
}

// judgeSubmit decides what a submit's answer means.
func judgeSubmit(p past, a answer) judgment {
	if a.resent {
		// The copy net/http sent first is an earlier attempt of ours that
		// may have executed: the answer is about the copy sent last.
		p.maybeExecuted = true
	}
	j := submitMeaning(p, a)
	j.refused = j.refused && !a.resent
	if a.keyIgnored && (p.maybeExecuted || !j.refused) {
		switch j.move {
		case moveQuery, moveResend, moveProcessing:
			// Whatever may have executed would execute again: the server
			// would take a resend for a new request.
			j.move, j.label, j.review = moveReview, "key_ignored", ReviewKeyIgnored
		case moveSettle:
			if p.maybeExecuted && !a.stored() {
				// This copy executed, and the server took it for a new
				// request: an earlier one that may have executed may
				// have done so as well.
				j.review = ReviewMaybeTwice
			}
		}
	}
	return heldElsewhere(p, j, a.body)
}

// heldElsewhere is j flagged ReviewMadeTwice when it names a resource
// other than the one the server said it holds for the key: its
// idempotency store lost the key and a resend executed afresh (or, if the
// answer is a replay, an earlier one whose answer was lost did). Both
// exist; resending more would tell nothing new. A result query's answer
// is read so too: what the key's result names is what the key made.
// Not an answer, body, whose own id is the one held (namesHeld): a status
// monitor's, naming its operation while it ran and the resource it made
// once done.
func heldElsewhere(p past, j judgment, body []byte) judgment {
	if p.held == "" || j.out.ResourceID == "" || j.out.ResourceID == p.held || j.move != moveProcessing && j.move != moveSettle ||
		namesHeld(body, p.held) {
		return j
	}
	j.err = fmt.Errorf("idem: the answer names resource %q, not %q, which the server had said it holds for the key: it lost the key and made another",
		truncate(j.out.ResourceID, 64), truncate(p.held, 64))
	j.label, j.review = "made_twice", ReviewMadeTwice
	if j.move == moveProcessing {
		j.move = moveReview
	}
	return j
}

func submitMeaning(p past, a answer) judgment {
	switch {
	case a.status == 0 && a.unsent:
		return judgment{move: moveResend, label: "not_sent", refused: true}
	case a.status == 0:
		return judgment{move: moveQuery, label: "response_lost"}
	case a.stored():
		return judgeReplay(p, a)
	case (a.copyRuns || a.copyMade) && !p.maybeExecuted:
		return copyClaimed(a)
	case a.orderPaid:
		return orderPaidMeaning(p, a)
	case a.inFlight:
		// The 409 of servers that answer it otherwise. Ours, if an
		// earlier attempt may have executed. Otherwise another request's,
		// which may charge: not "failed". Unlike a 409 it is not resent:
		// the journal marks a key contested by a 409 alone, and a result
		// replayed for the key later would be taken for ours.
		if p.maybeExecuted {
			return inFlightOurs(a)
		}
		// The server's words go with the attempt, as key_used_foreign's:
		// the person deciding whether a copy of ours is the one running
		// needs them.
		return judgment{move: moveReview, label: "in_flight_foreign", refused: true, review: ReviewKeyInUse, conflict: true,
			err: fmt.Errorf("idem: %s (to a first attempt, saying the key's request is running: a copy of this request may be the one)",
				refusalReason(a))}
	}
	switch a.verdict {
	case Settled:
		if a.envelopeRefusal && p.maybeExecuted {
			return refusedAfterMaybeSent(p, a)
		}
		j := otherRequestAnswered(judgeResult(a, "settled", "accepted"), a)
		if p.contested && a.otherRequest != "" && takenAsOurs(j) {
			return contestedOtherRequest(a, j.out.ResourceID)
		}
		return j
	case Processing:
		if a.status >= 200 && a.status < 300 {
			if p.contested && a.otherRequest != "" {
				// Another request's stored "accepted", as its success is
				// (TestFlexitiStoredAcceptedAfterAnotherRequestHeldTheKey):
				// taken as ours, its webhook's Confirm settled ours.
				return contestedOtherRequest(a, "")
			}
			// A classifier's 2xx "accepted": this attempt is in hand.
			return judgment{move: moveProcessing, label: "accepted"}
		}
		// The key is in flight on the server. Ours, if an earlier attempt
		// may have executed: wait for it. Otherwise someone else's: ours
		// did not execute, and a query would read their result.
		if !p.maybeExecuted {
			return judgment{move: moveResend, label: "in_flight_elsewhere", refused: true}
		}
		return inFlightOurs(a)
	case Throttled:
		// A gateway can answer 503 after the origin executed.
		return judgment{move: moveResend, label: "throttled", refused: a.status != http.StatusServiceUnavailable}
	case Conflict, Rejected:
		if p.maybeExecuted {
			return refusedAfterMaybeSent(p, a)
		}
		if a.keyConflict && !a.differs {
			// "Key already used", and not that this request differs: a
			// server that never replays answers so to a copy of this very
			// request (BVNK's 400 to an identical retry; Airwallex's
			// duplicate_request), and a copy may have gone first without
			// idem seeing it: a mesh's retry of a 503 (Istio), net/http's
			// resend on a dead reused connection, or a replica of ours
			// with the same key. Failed would invite the same payment
			// under a new key; another request's, as in_flight_foreign.
			// The server's words go with the attempt: nothing else keeps
			// them, and the person deciding whether it executed needs
			// them ("already exists" is not "different parameters").
			return judgment{move: moveReview, label: "key_used_foreign", refused: true, review: ReviewKeyInUse, conflict: true,
				err: fmt.Errorf("idem: %s (to a first attempt, saying only that the key was used: a copy of this request may have executed)",
					refusalReason(a))}
		}
		if a.versionMoved {
			// commercetools' ConcurrentModification, or a 412 to an
			// If-Match (conditionalUpdate): what moved the
			// version may be a copy of this very update, applied and its
			// answer lost before idem saw any (a mesh's retry of a 503
			// reset before headers: Istio's default retry_on), whose
			// retry the version check then refused. Failed, the update
			// is built again on the new version and applied twice (a
			// second addPayment, addTransaction, addLineItem). Left for a
			// person as a refusal of a resend after one that may have
			// executed: no key keeps the copy out, and a resend of these
			// bytes is refused so forever.
			//
			// Not refused, as orderPaidMeaning's first attempt is not:
			// the result endpoint, if any, is asked by the key (a copy of
			// ours found settles; "not found" past the lag fails it,
			// orderHeld's words read back by pastOf), and without one it
			// is left for a person at once. After the server said another
			// request held the key, for a person as it was.
			if !p.contested {
				h := orderHeld[versionMovedHeld]
				return judgment{move: moveReview, label: "version_moved", review: ReviewRefusedAfterSend,
					err: fmt.Errorf("%s: %s%s", h.words, refusalReason(a), h.ask)}
			}
			return judgment{move: moveReview, label: "version_moved", refused: true, review: ReviewRefusedAfterSend,
				err: fmt.Errorf("idem: %s (to a first attempt, saying the resource changed since the update was built: a copy of this update a proxy retried may have changed it; "+
					"see whether the resource holds the update before building one on its new version)",
					refusalReason(a))}
		}
		if a.redirect == "" && (a.cut || !a.tooLarge && cutDocument(a.body)) {
			// The words that tell a refusal on its merits from "the key's
			// request runs" or "the key was used" (Adyen's 422 704) may
			// be in the part lost: read by its status, it failed a
			// payment another request of the key, perhaps a copy of this
			// one, may charge. The same bytes go again under the same
			// key, and the whole answer is judged. Not one over the cap,
			// whole as sent: its start is all any copy of it would give.
			return judgment{move: moveResend, label: "refusal_cut", refused: true,
				err: fmt.Errorf("idem: %d refusal whose body was cut in transit, sent again for its words: %s", a.status, errorReason(a.status, a.body))}
		}
		j := judgment{move: moveSettle, label: "rejected", refused: true,
			out: Outcome{State: StateFailed, Reason: errorReason(a.status, a.body)}}
		if a.redirect != "" {
			j.label = "redirected"
			j.out.Reason = fmt.Sprintf("%d: the server's router redirects this URL to %s before any handler runs: nothing executed; send the request there",
				a.status, a.redirect)
		}
		if a.keyConflict {
			j.label, j.conflict = "conflict", true
		} else if saysKeyMissing(a.body) {
			j.out.Reason += keyMissingHint
		}
		return j
	default:
		return judgment{move: moveQuery, label: "ambiguous", err: notFollowed(a)}
	}
}

// copyClaimed is the judgment of a first attempt's 409 from an endpoint
// that ignores the key, whose words say the order's payment runs
// (copyRuns) or that the order exists, is a duplicate or was paid
// (copyMade). Such an endpoint checks the order, never the key: what it
// holds may be a copy of this very request that a proxy sent again (a
// mesh's retry of a 503 or of a reset, whatever the method: Envoy's
// retry_on 5xx or reset), which it executed as it executes every copy.
// Failed, the caller paid again under a new key; resent, the endpoint
// executed the resend: a second charge either way. The attempt counts as
// one that may have executed, flagged ReviewKeyIgnored and never resent;
// the result endpoint, if there is one, is asked (copyClaimedFound), and
// one saying the payment runs is awaited (awaits). The server's words go
// with the attempt, for the person deciding.
func copyClaimed(a answer) judgment {
	return judgment{move: moveReview, label: "key_ignored_copy", review: ReviewKeyIgnored, awaits: a.copyRuns,
		err: fmt.Errorf("%s: %s (what it refers to may be a copy of this request a proxy sent again, which the endpoint executed as it executes every copy)",
			copyClaimedWords, refusalReason(a))}
}

// copyClaimedWords begin the journaled error of copyClaimed's attempt,
// which pastOf reads back (past.copyClaimed): keep them as written.
const copyClaimedWords = "idem: to a first attempt, an endpoint that ignores the key said the order is held"

// copyClaimedFound is the judgment of a result query's success after
// copyClaimed. The endpoint answers about the order, whoever paid it: the
// payment it names may be the copy's, or another request's that paid the
// order under another key (the order paid twice over, an order id used
// again), which nothing in an answer about the order tells apart when the
// two are alike. Settled, that payment was counted for both. Left for a
// person, the payment named; a failed one settles (nothing of ours
// charged, whoever tried); a running one is asked about again, never
// recorded as ours (queryMeaning).
func copyClaimedFound(j judgment) judgment {
	return judgment{move: moveReview, label: "query_copy_claimed", review: ReviewKeyIgnored,
		err: fmt.Errorf("idem: the result endpoint names payment %q of the order, which may be the one a copy of this request made or another request's: "+
			"check whose it is with the provider, then Resolve", truncate(j.out.ResourceID, 64))}
}

// orderPaidMeaning is the judgment of a refusal saying the order is paid
// (a.orderPaid). The server checks the order before the key, so the
// payment that paid it may be a copy of ours under this very key: a
// mesh's retry of a reset or a 5xx (Istio's, Envoy's retry_on), sent
// before ours arrived and executed, its answer lost. Failed, the caller
// would pay again under a new key or another order: a second charge.
// Resent, the server refuses so forever (read as the key in flight, the
// 409 was resent until the key window). So even to an attempt before
// which nothing of ours may have executed, it is a send that may have
// executed (not refused): never resent, and the result endpoint, if any,
// is asked by the key, which this server keeps, so its answer is about
// our key: a payment it names settles (ours paid), and "not found" once
// past the lag fails it with the server's reason and orderPaidHint
// (orderPaidNotFound: another request paid the order). What it cannot
// settle, and all of it without a result endpoint, is left unknown,
// ReviewRefusedAfterSend: a refusal after a send of ours that may have
// executed, which is what it is; not ReviewKeyInUse nor ErrKeyConflict,
// no key was reused. After a send of ours that may have executed so
// too. After the server said another request held the key (p.contested):
// that request may be a copy of ours a mesh sent, its payment the one
// that paid the order, and the endpoint's answer for the key may be
// another request's: left for a person as the key's other holder is.
// From an endpoint known to ignore the key, the refusal is not read so
// (submit takes it for copyClaimed's), nor is the result endpoint's
// answer once it is learnt to (driver.query): it is about the order.
// A create's 409 saying the order exists (a.orderExists) is read so too:
// what made the order may be a copy of ours.
func orderPaidMeaning(p past, a answer) judgment {
	h, what, which := orderHeld[0], "is paid", "the payment that paid the order"
	if a.orderExists {
		h, what, which = orderHeld[1], "exists", "the order"
	}
	switch {
	case p.maybeExecuted:
		return judgment{move: moveReview, label: "order_paid_after_send", refused: true, review: ReviewRefusedAfterSend,
			err: fmt.Errorf("idem: %s (after a send of ours that may have executed, the server says the order %s: it may be ours, "+
				"or another request's; ask the provider whose it is, then Resolve)", refusalReason(a), what)}
	case p.contested:
		return judgment{move: moveReview, label: "order_paid_contested", refused: true, review: ReviewKeyInUse, conflict: true,
			err: fmt.Errorf("idem: %s (after the server said another request held the key, which may be a copy of this one: "+
				"%s may be that request's; ask the provider whose it is, then Resolve)", refusalReason(a), which)}
	}
	return judgment{move: moveReview, label: "order_paid", review: ReviewRefusedAfterSend,
		err: fmt.Errorf("%s: %s%s", h.words, refusalReason(a), h.ask)}
}

// orderPaidWords begin the journaled error of orderPaidMeaning's attempt
// before which nothing of ours may have executed, which pastOf reads back
// (past.orderPaid) and orderPaidNotFound cuts the server's reason from:
// keep them as written.
const orderPaidWords = "idem: the server says the order is paid already"

// orderPaidAsk follows the server's reason in the error of
// orderPaidMeaning's first attempt.
const orderPaidAsk = " (maybe by a copy of this request a proxy sent again, which the server executed before this one: " +
	"ask the provider whose payment it is, then Resolve)"

// orderExistsWords, orderExistsAsk and orderExistsHint are orderPaidWords',
// orderPaidAsk's and orderPaidHint's for a create's 409 saying the order
// exists already (answer.orderExists): the words are read back as
// orderPaidWords are.
const (
	orderExistsWords = "idem: the server says the order exists already"
	orderExistsAsk   = " (maybe made by a copy of this request a proxy sent again, which the server executed before this one: " +
		"ask the provider whose order it is, then Resolve)"
	orderExistsHint = " (the order exists already, and the result endpoint finds nothing under this request's key: " +
		"see who made it before making it again, under a new key or another reference)"
)

// versionMovedWords, versionMovedAsk and versionMovedHint are
// orderPaidWords', orderPaidAsk's and orderPaidHint's for a first
// attempt's refusal saying the resource changed since the update was
// built (answer.versionMoved), read back as orderPaidWords are: what
// changed it may be a copy of ours, found by the key, or another writer.
const (
	versionMovedWords = "idem: to a first attempt, the server says the resource changed since the update was built"
	versionMovedAsk   = " (a copy of this update a proxy retried may have changed it; " +
		"see whether the resource holds the update before building one on its new version)"
	versionMovedHint = " (the resource changed since the update was built, and the result endpoint finds no update under this request's key: " +
		"another writer changed it; fetch its new version and see whether the update is still wanted)"
)

// orderHeld are the words, ask and hint of orderPaidMeaning's refusal, by
// what the server said of the order: paid, or (a create's) existing; and
// of a first attempt's versionMoved refusal (versionMovedHeld). notFound
// and expired label the result endpoint's "not found" for the key past
// the lag (orderPaidNotFound) and past the key window
// (orderPaidNotFoundWithin) in the attempt's log: a version conflict
// logged as "order_paid" sends whoever reads it after a payment.
var orderHeld = [...]struct{ words, ask, hint, notFound, expired string }{
	{orderPaidWords, orderPaidAsk, orderPaidHint, "order_paid_not_found", "order_paid_key_expired"},
	{orderExistsWords, orderExistsAsk, orderExistsHint, "order_paid_not_found", "order_paid_key_expired"},
	{versionMovedWords, versionMovedAsk, versionMovedHint, "version_moved_not_found", "version_moved_key_expired"},
}

// versionMovedHeld is versionMovedWords' index in orderHeld.
const versionMovedHeld = 2

// orderHeldOf is the index in orderHeld of the words err, an attempt's
// journaled error, begins with.
func orderHeldOf(err string) (int, bool) {
	for i, h := range orderHeld {
		if strings.HasPrefix(err, h.words) {
			return i, true
		}
	}
	return 0, false
}

// lastOrderHeld is the journaled error of rec's latest attempt that
// orderPaidMeaning refused, and its index in orderHeld; ok false if none.
func lastOrderHeld(rec *journal.Record) (err string, k int, ok bool) {
	for i := len(rec.Attempts) - 1; i >= 0; i-- {
		err = rec.Attempts[i].Err
		if k, ok = orderHeldOf(err); ok {
			return err, k, true
		}
	}
	return "", 0, false
}

// orderPaidError is what a call ends with when the result endpoint has
// not settled orderPaidMeaning's refusal: the journaled words, which say
// the order is paid (or exists), maybe by a copy of ours, and whom to ask.
func orderPaidError(rec *journal.Record) error {
	if err, _, ok := lastOrderHeld(rec); ok {
		return fmt.Errorf("%w: %s", ErrNeedsReview, strings.TrimPrefix(err, "idem: "))
	}
	return ErrNeedsReview
}

// orderPaidNotFound is the judgment of the result endpoint's "not found"
// for the key after orderPaidMeaning's refusal, the lag past: nothing of
// ours under the key executed, and another request paid (or made) the
// order. Its reason is the server's, journaled with the refusal.
func orderPaidNotFound(rec *journal.Record) judgment {
	reason, h := "", orderHeld[0]
	if err, k, ok := lastOrderHeld(rec); ok {
		h = orderHeld[k]
		reason = strings.TrimSuffix(strings.TrimPrefix(err, h.words+": "), h.ask)
	}
	return judgment{move: moveSettle, label: h.notFound,
		out: Outcome{State: StateFailed, Reason: reason + h.hint}}
}

// orderPaidNotFoundWithin is the judgment of the result endpoint's "not
// found" j for the key after orderPaidMeaning's refusal, the lag past,
// for a query sent at start: orderPaidNotFound while the server keeps
// the key (its window, as resends judge it). Past the window (a result
// host down for days) the server may have forgotten the key and the
// payment a copy of ours made under it: failed, the caller would pay
// again. It is left for a person, "key expired", as any query past the
// window that does not settle. A window the clock cannot judge (a time
// journaled in its future) leaves j as it is: asked again later. The
// window counts from the first attempt, not from FirstSent: a copy of an
// attempt answered as not executed (a 429 to a mesh's retry of one that
// paid) may be the one that paid, and the key's age is that copy's. Nor
// once flagged ReviewKeyExpired: the server's own word (a 410) that it
// has forgotten the key stands against any window (flagBlock).
func orderPaidNotFoundWithin(j judgment, rec *journal.Record, p past, start time.Time, window time.Duration) judgment {
	switch keyWindow(rec, p, start, window) {
	case windowUntrusted:
		return j
	case windowOpen:
		if rec.Review != ReviewKeyExpired && (len(rec.Attempts) == 0 || start.Sub(rec.Attempts[0].Start) < window) {
			return orderPaidNotFound(rec)
		}
	}
	_, k, _ := lastOrderHeld(rec)
	return judgment{move: moveReview, label: orderHeld[k].expired, review: ReviewKeyExpired}
}

// orderPaidHint follows the reason of a payment refused because its
// order is paid already, which the result endpoint does not find under
// the key (orderPaidNotFound).
const orderPaidHint = " (the order is paid already, and the result endpoint finds no payment under this request's key: " +
	"see who paid it before paying for it again, under a new key or another order)"

// refusedAfterMaybeSent: an earlier attempt may have executed, so a
// refusal may be a gateway's or an expired credential's, or refuse this
// copy for what the earlier one did, rather than be the operation's own
// result, and "failed" would invite a retry under a new key: a second
// charge. Asked about, and left for a person once it persists.
func refusedAfterMaybeSent(p past, a answer) judgment {
	j := judgment{move: moveQuery, label: "refused_after_maybe_sent", refused: true}
	if a.status == http.StatusConflict {
		// The journal keeps no verdict: the attempt's words tell pastOf
		// that this 409 refused, as a 422 does (Xendit's DUPLICATE_ERROR),
		// and is no 409 in flight, which is only waited for.
		words := conflictAfterSend
		if objectStateRefusal(a.body) || badValueRefusal(a.body) {
			words = stateAfterSend
		}
		j.err = fmt.Errorf("%s: %s", words, refusalReason(a))
	}
	if p.refusals+1 >= maxRefusalsAfterSend {
		j.move, j.review = moveReview, ReviewRefusedAfterSend
	}
	return j
}

// refusalReason is a refusal's words for people: for a 2xx the decoder
// read as failed, its reason, which may be the only reading of them
// (Kraken Futures' sendStatus.status, a member errorReason does not
// read); else the server's, as errorReason finds them.
func refusalReason(a answer) string {
	if a.status >= 200 && a.status < 300 && a.out.Reason != "" {
		return fmt.Sprintf("%d: %s", a.status, truncate(a.out.Reason, 512))
	}
	return errorReason(a.status, a.body)
}

// stored reports whether the answer is the server's stored one for the
// key: marked replayed, or naming the resource the key created.
func (a answer) stored() bool { return a.replayed || a.created != "" }

// judgeReplay: a replayed answer is the server's final word for the key.
// The attempt it answers did not execute (refused): the server answered
// from its store.
func judgeReplay(p past, a answer) judgment {
	j := replayMeaning(p, a)
	j.refused = true
	return j
}

func replayMeaning(p past, a answer) judgment {
	if a.actedOn && p.maybeExecuted {
		return actedOnMeaning(a)
	}
	switch {
	case a.status >= 400 && a.status < 500 && a.created == "" && a.verdict != Ambiguous:
		// A stored refusal: whichever request ran first was refused, and
		// nothing ran after it. Failed, even if it was not ours: nothing
		// of ours executed either. Not a stored 408 or 499 (a timeout, a
		// cancellation): the handler may have done its work before it,
		// as before a stored 5xx.
		return judgment{move: moveSettle, label: "replayed_rejection",
			out:      Outcome{State: StateFailed, Reason: errorReason(a.status, a.body)},
			conflict: a.keyConflict}
	case a.created != "" && !a.actedOn && resourceStatusOf(a.createdStatus) == statusFailed:
		// The key's payment was declined: as a stored refusal, whichever
		// request ran first was refused and nothing ran after it.
		return judgment{move: moveSettle, label: "created_failed",
			out:      Outcome{State: StateFailed, ResourceID: a.created, Reason: truncate(a.createdStatus, 64)},
			conflict: a.keyConflict && !p.maybeExecuted}
	case !p.maybeExecuted:
		return judgment{move: moveReview, label: "replayed_foreign", review: ReviewKeyInUse, conflict: true}
	case a.created != "":
		if p.contested {
			return contestedSuccess("created_contested")
		}
		if a.otherRequest != "" && !(p.heldOwn && a.created == p.held && !a.otherFixed) {
			// The key's resource is another request's (a key shared, or
			// reused from a business id): ours may never have run.
			return judgment{move: moveReview, label: "created_other_request", review: ReviewKeyInUse, conflict: true,
				err: fmt.Errorf("idem: the resource the key created is another request's: its %s; check which resource is ours with the provider, then Resolve", a.otherRequest)}
		}
		return judgment{move: moveSettle, label: "created", out: Outcome{State: StateSucceeded, ResourceID: a.created}}
	case a.status >= 200 && a.status < 300:
		j := judgeResult(a, "replayed_result", "replayed_processing")
		// A stored "accepted, still running" is the other request's work
		// as much as its success is: its resource, recorded, would be
		// found as ours (LookupResource) and settled by its webhook.
		if p.contested && (j.move == moveSettle && j.out.State == StateSucceeded || j.move == moveProcessing) {
			return contestedSuccess("replayed_contested")
		}
		if takenAsOurs(j) && a.otherRequest != "" && !(p.heldOwn && j.out.ResourceID == p.held && !a.otherFixed) {
			// The key's stored answer describes another request (a key
			// shared, or reused from a business id, on a server that
			// replays it whatever the body): ours may never have run,
			// and a resend is replayed the same. Its resource goes in
			// the error only: a webhook's Confirm for it must not settle
			// ours. One our own answer named (heldOwn) is ours, as a
			// query's answer is, unless it differs where nothing amends.
			return judgment{move: moveReview, label: "replayed_other_request", review: ReviewKeyInUse, conflict: true,
				err: fmt.Errorf("idem: the server replayed the key's stored answer, and it describes another request (%q): its %s; check which is ours with the provider, then Resolve",
					truncate(j.out.ResourceID, 64), a.otherRequest)}
		}
		if j.move == moveQuery && !a.cut {
			// The stored answer itself proves nothing: resending replays
			// it again. A body cut in transit is another matter.
			j.move, j.review = moveReview, ReviewFinalAnswer+": "+j.err.Error()
		}
		return j
	default:
		// A stored 5xx, 408 or 499: the handler may have done work
		// before failing.
		return judgment{move: moveReview, label: "replayed_error",
			review: fmt.Sprintf("server replayed a stored %d for this key: the request may have executed", a.status)}
	}
}

// actedOnMeaning is the judgment of the key's final answer naming only
// the resource the request acted on (a.actedOn), after an attempt of ours
// that may have executed: ours was processed, and how it ended (a refund
// made or declined) the answer does not say. Taken as the resource the
// key made, a declined refund of a settled payment settled succeeded
// with the payment's id, and its customer was never refunded; failed,
// one made would be made again. Resending gets the same answer.
func actedOnMeaning(a answer) judgment {
	err := fmt.Errorf("idem: the server says the key's request was processed, naming only %q, the resource this request acted on, and its status %q: "+
		"not how the request ended; check with the provider, then Resolve", truncate(a.created, 64), truncate(a.createdStatus, 64))
	return judgment{move: moveReview, label: "acted_on", review: ReviewFinalAnswer + ": " + err.Error(), err: err}
}

// contestedOtherRequest: a 409 said another request held the key before
// anything of ours could have run, and this answer, unmarked, describes a
// request other than ours (a's otherRequest): that request's stored
// answer, which a server that keeps the key's first answer gives every
// later copy (Flexiti's X-Idempotency-Key "will return the previously
// successful response"). One that describes ours is ours, a mesh's copy
// of ours the request that held the key
// (TestMeshRetryInFlightThenStoredOrderIsOurs). The resource it names,
// if any, goes in the attempt's error only: a webhook's Confirm for it
// must not settle ours.
func contestedOtherRequest(a answer, resource string) judgment {
	named := ""
	if resource != "" {
		named = fmt.Sprintf(" (%q)", truncate(resource, 64))
	}
	return judgment{move: moveReview, label: "contested_other_request", review: ReviewKeyInUse, conflict: true,
		err: fmt.Errorf("idem: after a 409 said another request held the key, the answer describes that request%s, not ours: its %s; check which order is ours with the provider, then Resolve", named, a.otherRequest)}
}

// contestedSuccess: another request held the key, so a success stored for
// it may be that request's order, never taken as ours. A stored failure
// is safe to take: whoever ran first failed, and nothing ran after it.
func contestedSuccess(label string) judgment {
	return judgment{move: moveReview, label: label, review: ReviewKeyInUse, conflict: true}
}

// judgeResult reads a decoded 2xx. A 206 Partial Content proves nothing,
// whatever a decoder made of it: it answers a Range request, which idem
// never sends (a POST has no range, and a journaled Range header stays
// off result queries), so a cache served part of what it stored for some
// request, and a part that happens to be whole is still not this
// request's answer.
func judgeResult(a answer, settled, processing string) judgment {
	switch {
	case a.decodeErr != nil:
		return judgment{move: moveQuery, label: "undecodable", err: a.decodeErr}
	case a.status == http.StatusPartialContent:
		return judgment{move: moveQuery, label: "undecodable",
			err: fmt.Errorf("%w: 206 Partial Content answers a Range request idem never sent: a cache's stored part", errUndecodable)}
	case a.out.State == StateProcessing:
		return judgment{move: moveProcessing, label: processing, out: a.out}
	case a.out.State.Terminal():
		return judgment{move: moveSettle, label: settled, out: a.out}
	default:
		return judgment{move: moveQuery, label: "undecodable",
			err: fmt.Errorf("%w: decoder returned state %q", errUndecodable, a.out.State)}
	}
}

// judgeQuery decides what a result query's answer means.
func judgeQuery(p past, a answer) judgment {
	j := queryMeaning(p, a)
	if j.move == moveInconclusive && a.cached != "" {
		// A cache keyed on the path alone (CloudFront's CachingOptimized
		// leaves the query string out) serves another key's answer, or
		// an old one: whatever its status, not the endpoint's word on
		// this order now. Nor is the key's own: a "not found" stored
		// while the read path lagged and served past the result lag
		// (nginx's proxy_cache_use_stale while the origin fails) sent a
		// client order id again, or failed a payment refused "order
		// already paid" that a copy of ours had paid.
		j.failed = true
	}
	if j.move == moveInconclusive && (a.cut || cutDocument(a.body)) {
		// A body cut in transit (the connection closed before its
		// Content-Length's octets came) is no search that found nothing:
		// the order, or the error, may have been further on. Read by its
		// first bytes, a 200 holding the order was taken for one that
		// did not name it, and the client order id was sent again. So
		// is a JSON document that does not parse, however it came: a
		// body delimited by the connection's close ends wherever the
		// close came, with no read error (RFC 9112 6.3), and one over
		// the cap is its first bytes.
		j.failed = true
	}
	return heldElsewhere(p, j, a.body)
}

// cutDocument reports whether body is the beginning of a JSON document:
// valid as far as it goes, it ends before the document does. What
// arrived of one, not an answer. Not a body that breaks JSON's syntax
// before its end (a Python dict's repr, {'error': …}): that is whole, in
// a form of its own, and is read as it always was.
func cutDocument(body []byte) bool {
	doc := bytes.TrimSpace(trimBOM(body))
	if len(doc) == 0 || doc[0] != '{' && doc[0] != '[' || json.Valid(doc) {
		return false
	}
	var se *json.SyntaxError
	return errors.As(json.Unmarshal(doc, new(json.RawMessage)), &se) && se.Offset == int64(len(doc))
}

// queryMeaning is what a result query's answer says of the operation, by
// its status and body alone; judgeQuery then weighs where the answer came
// from.
func queryMeaning(p past, a answer) judgment {
	switch {
	case a.status >= 200 && a.status < 300 && a.status != http.StatusPartialContent && errors.Is(a.decodeErr, ErrResultNotFound):
		// The Decoder read the API's own words for an unknown key, which
		// the body's heuristics may take for a failed query (HTX's
		// {"status":"error","err-code":"base-record-invalid"}) or for the
		// order found (a body echoing the key beside "found": false).
		// Weighed as the endpoint's 404 is: one whose words say a part
		// of the query, or the merchant, is missing never looked for the
		// order (Hasura's "field 'orders' not found in type:
		// 'query_root'", no "data" in it, which a Decoder reading an
		// empty list of orders as none takes for its not-found).
		return judgment{move: moveInconclusive, label: "query_not_found", notFound: true, failed: a.otherMissing || a.morePages, err: pageErr(a, a.decodeErr)}
	case a.status >= 200 && a.status < 300 && a.status != http.StatusPartialContent && envelopeNotFound(a.body):
		// Midtrans answers a status query for an order_id it never saw
		// 200 OK, its own 404 in the body ({"status_code":"404",
		// "status_message":"Transaction doesn't exist."}), which a
		// decoder reading its status_code as midtrans-go does takes for
		// the charge's failure, and the words for no "not found". It is
		// the endpoint's 404: a resend of the same order_id is safe once
		// the read path has had time to catch up. Unless, as for the
		// endpoint's own 404, its words say something else is missing
		// (the merchant): that query never looked for the order.
		return judgment{move: moveInconclusive, label: "query_not_found", notFound: true, failed: a.otherMissing}
	case a.status >= 200 && a.status < 300:
		j := judgeResult(a, "settled", "processing")
		switch {
		case j.move == moveQuery && a.foundOrder:
			// A client order id is often a key only while its order is
			// open (Binance's newClientOrderId, Kraken's cl_ord_id): a
			// resend after the order filled places it again. The server
			// holds it; asking again is all that is safe.
			j.move, j.label = moveProcessing, "found_unread"
			j.err = fmt.Errorf("%w, but it names the key the request's body carries: the order exists, and a resend may place it again; "+
				"a Decoder that reads this answer (WithDecoder) settles it", j.err)
		case j.move == moveQuery:
			j.move, j.label, j.failed = moveInconclusive, "query_failed", queryFailed(a.status, a.body, a.otherMissing) || a.morePages
			j.err = pageErr(a, j.err)
		}
		switch {
		case (j.move == moveSettle || j.move == moveProcessing) && a.otherRequest != "" &&
			!(p.heldOwn && j.out.ResourceID == p.held && !a.otherFixed):
			// The key's result is another request's: one that used the key
			// first (a client order id free again once its order filled,
			// a key space shared with another service). Settling ours with
			// it would report an order perhaps never placed as made. The
			// resource our own answer named (heldOwn) is ours whatever it
			// says now: a resting order is amended in place, its price
			// and quantity then not the ones sent (Bybit's amend-order,
			// Binance's futures Modify Order keep the client order id).
			// Not its side or symbol: a create may be answered with the
			// order another request left under the id (Coinbase Advanced
			// Trade returns it "instead"), which our answer then named.
			return judgment{move: moveReview, label: "query_other_request", review: ReviewKeyInUse, conflict: true,
				err: fmt.Errorf("%s: its %s", journal.QueryFoundOther, a.otherRequest)}
		case j.move == moveSettle && p.contested && j.out.State == StateSucceeded:
			return contestedSuccess("query_contested")
		case j.move == moveSettle && p.copyClaimed && j.out.State == StateSucceeded:
			return copyClaimedFound(j)
		case j.move == moveProcessing && p.copyClaimed:
			// Whoever's payment runs, it is not recorded as ours: asked
			// again while the words said it runs (awaits), as if not
			// found, and left for a person with nothing named ours.
			return judgment{move: moveInconclusive, label: "query_copy_claimed_running",
				err: fmt.Errorf("idem: the result endpoint says payment %q of the order runs, which may be a copy of this request's or another request's", truncate(j.out.ResourceID, 64))}
		}
		return j
	case a.otherCache && (a.status == http.StatusGone || a.status == http.StatusNotFound):
		// Another key's "gone" would flag ours expired for a person.
		return judgment{move: moveInconclusive, label: "query_not_found", notFound: a.status == http.StatusNotFound,
			err: fmt.Errorf("idem: a cache's %d (%s) that does not name the key: maybe another key's", a.status, a.cached)}
	case a.status == http.StatusNotFound && saysKeyForgotten(a.body):
		// A 404 that says the key expired is a 410 in other words: the
		// server has forgotten it, and a resend would execute afresh.
		return judgment{move: moveReview, label: "query_expired", review: ReviewKeyExpired}
	case a.status == http.StatusNotFound:
		// "Not found" is not "never happened": replicas lag.
		return judgment{move: moveInconclusive, label: "query_not_found", notFound: true, failed: queryFailed(a.status, a.body, a.otherMissing)}
	case a.status == http.StatusGone:
		// Unlike 404, "gone" says the server held the key and has
		// forgotten it, sooner than the client's key window assumed: a
		// resend would be executed afresh.
		return judgment{move: moveReview, label: "query_gone", review: ReviewKeyExpired}
	case a.status == http.StatusTooManyRequests || a.status == http.StatusServiceUnavailable:
		return judgment{move: moveResend, label: "throttled"}
	default:
		return judgment{move: moveInconclusive, label: "query_failed", err: queryRefusal(a), failed: queryFailed(a.status, a.body, a.otherMissing)}
	}
}

// pageErr is err, why a result query's 2xx a proves nothing, and, when a
// is a page that says more follow (morePages), that its missing the key
// is no "not found": asked again, never resent on it, as a failed query
// is. Read as a search that found nothing (or a decoder's empty first
// page), the order on a later page, or one a search stopped short of,
// was placed again once the result lag had passed.
func pageErr(a answer, err error) error {
	if !a.morePages {
		return err
	}
	return fmt.Errorf("%w; the answer is one page of a list or search whose pager says more follow: the order may be on another", err)
}

// queryRefusal is what a result query's failed answer says, for the
// journaled attempt: a redirect's target, or the server's words (an
// expired API key's 401, a permission's 403), blanked of credentials
// with the attempt's. Nothing else keeps them, and the operation stays
// unknown until what they name is fixed.
func queryRefusal(a answer) error {
	if err := notFollowed(a); err != nil || a.status < 400 {
		return err
	}
	if silentStatus(a.status) {
		// A gateway's 502 or 504, Cloudflare's 52x: the result endpoint
		// itself said nothing, refused nothing.
		return fmt.Errorf("idem: no answer from the result endpoint, the operation stays unknown and is queried again: %s", errorReason(a.status, a.body))
	}
	return fmt.Errorf("idem: result query refused, the operation stays unknown and is queried again: %s", errorReason(a.status, a.body))
}

// queryFailed reports whether a result query's inconclusive answer of
// status (not a 410, 429 or 503) says nothing of the operation, as no
// answer does: a redirect, a 5xx, a 401 or 403, a 400 or 422 about the
// query itself (a bad signature, a timestamp out of its window, a
// parameter missing), a proxy's own 404 that never reached the endpoint
// (no JSON document: nginx's HTML page, Envoy's empty one; or Kong's
// {"message":"no Route matched with those values"} while its router is
// rebuilt, Kong/kong#4194; the API's own router for a path it does not
// have, which no endpoint answered: Stripe's "Unrecognized request URL
// (GET: …)", Spring's ProblemDetail "No endpoint GET …." or "No static
// resource ….", Laravel's "The route … could not be found."), a 2xx
// that is no JSON document (a WAF's empty 202 challenge, an HTML page)
// or that carries an error, in an "error" member or in an envelope's
// code (Bybit's retCode 10006, HTX's "status": "error": envelopeError),
// and any 206, a cache's stored part (judgeResult).
// Not one that says what it asked for
// does not exist, as the endpoint's own 404 does (Binance's 400
// {"code":-2013,"msg":"Order does not exist."}, Flutterwave's 400 "No
// transaction was found for this id" for a tx_ref it has no charge
// for), nor a 2xx document with no error that does not name it (a
// search that found nothing). A "not found" of something else the query
// named (the merchant, the API key: otherMissing, the answer's) never
// looked for the operation, whatever the status.
func queryFailed(status int, body []byte, otherMissing bool) bool {
	missing := func() bool {
		return saysAny(body, "not found", "does not exist", "no such", "no transaction was found") && !otherMissing
	}
	doc := bytes.TrimSpace(trimBOM(body))
	notJSON := len(doc) == 0 || doc[0] != '{' && doc[0] != '['
	switch {
	case status == http.StatusPartialContent:
		return true // a cache's stored part (judgeResult): no search at all
	case status >= 200 && status < 300:
		return notJSON || carriesError(doc) && !missing()
	case status == http.StatusBadRequest, status == http.StatusUnprocessableEntity:
		return !missing()
	case status == http.StatusNotFound:
		return notJSON || otherMissing || saysAny(doc, "no route", "unrecognized request url", "no endpoint ", "no static resource") ||
			saysAny(doc, "the route ") && saysAny(doc, " could not be found")
	}
	return true
}

// carriesError reports whether a JSON body carries an error as
// DecodeJSON reads one: an "error" or "errors" member that is not null or
// empty, or "success": false; or as an envelope says one (envelopeError);
// at the top or in the object a lone "data" envelope holds
// (dataResource), which DecodeJSON reads as the answer. Read at the top
// only, a query's 200 {"data":{"error":…}} was a search that found
// nothing, and the key in the body was sent again. Past a leading byte
// order mark, as DecodeJSON reads a body (trimBOM).
func carriesError(body []byte) bool {
	body = trimBOM(body)
	if errorAtTop(body) {
		return true
	}
	data, ok := dataResource(body)
	return ok && errorAtTop(data)
}

// errorAtTop is carriesError of body's own members.
func errorAtTop(body []byte) bool {
	v, ok := scanResult(body)
	if !ok {
		var err error
		if v, err = unmarshalResult(body); err != nil {
			return false // a list, or not JSON
		}
	}
	return v[memError].ok || v[memErrors].ok || v[memUnsuccessful].ok || envelopeError(body)
}

// envelopeError reports whether a JSON object is the envelope of an API
// that answers its errors with 200 OK, saying one: a top-level "code",
// "retCode" or "ret_code" that is not a success (Bybit's {"retCode":10006,
// "retMsg":"Too many visits"}, OKX's {"code":"50011"}; success is 0, 200,
// KuCoin's "200000", Bitget's "00000", "ok" or "success"), or a "status"
// of "error" or "fail" (HTX's {"status":"error","err-code":…}, JSend's)
// or an HTTP error's number, or a "status_code" that is one, a number or
// its digits (Midtrans's {"status_code":"406",…} to an order_id it
// holds; not beside a resource's status word, which it numbers, but
// beside the code's own reason phrase, which names its error:
// resourceWord). Read with no "error" member, such an answer
// was a search that found nothing, and a client order id was sent again
// though the order might have been placed. An order's own "status"
// ("FILLED") is none of these; a "code" that names a resource reads as
// an error, which only has the query asked again.
func envelopeError(body []byte) bool {
	var top map[string]json.RawMessage
	if json.Unmarshal(body, &top) != nil {
		return false
	}
	var words []string
	var codes []json.RawMessage
	for name, raw := range top {
		switch strings.ToLower(name) {
		case "code", "retcode", "ret_code":
			if errorCode(raw) {
				return true
			}
		case "status":
			if errorStatus(raw) {
				return true
			}
			var s string
			if json.Unmarshal(raw, &s) == nil {
				words = append(words, s)
			}
		case "status_code":
			// Midtrans's own status, an HTTP number as a string in its
			// 200 reply ("406" for an order_id it holds); its 2xx
			// ("201" pending, "202" denied) say what became of a charge.
			codes = append(codes, raw)
		}
	}
	for _, code := range codes {
		// Beside a resource's status word, a "status_code" numbers that
		// status (dLocal's CANCELLED payment, "status_code":"400"): the
		// payment found, not an error.
		numbered := slices.ContainsFunc(words, func(w string) bool { return resourceWord(w, code) })
		if httpError(code) && !numbered {
			return true
		}
	}
	return false
}

// resourceWord reports whether a "status" string is a resource's state
// that code, the "status_code" beside it, may number ("CANCELLED",
// "PAID"): not empty, not a number, not an envelope's outcome ("ok",
// "success", "error", "fail", "failure"), not a refusal ("failed",
// "rejected"): an HTTP error's number beside one may be the call's own
// error, which proves nothing, as before; and not the code's own HTTP
// reason phrase, which names the error the code numbers (snapd's
// envelope {"type":"error","status":"Unauthorized","status_code":401},
// or "NOT_FOUND" beside 404 as Spring's HttpStatus names it): no
// resource's state, and read as one a 200 carrying it settled
// succeeded, or, to a result query, read as a search that found nothing
// and let the order be sent again.
func resourceWord(s string, code json.RawMessage) bool {
	s = strings.ToLower(strings.TrimSpace(s))
	switch s {
	case "", "ok", "success", "fail", "failure":
		return false
	}
	if _, err := strconv.Atoi(s); err == nil {
		return false
	}
	if n, ok := statusNumber(code); ok && phraseSeparators.Replace(s) == strings.ToLower(http.StatusText(n)) {
		return false
	}
	st := resourceStatusOf(s)
	return st != statusFailed && st != statusError
}

// phraseSeparators reads an HTTP reason phrase written as an enum's
// name ("NOT_FOUND") or a slug ("not-found") as its words.
var phraseSeparators = strings.NewReplacer("_", " ", "-", " ")

// envelopeNotFound reports whether a JSON object's top-level
// "status_code", a number or its digits, is 404: the API's own status in
// a 200 reply (Midtrans's, as envelopeError reads it).
func envelopeNotFound(body []byte) bool {
	if !bytes.Contains(body, []byte(`"status_code"`)) {
		return false
	}
	var top struct {
		StatusCode json.RawMessage `json:"status_code"`
	}
	if json.Unmarshal(body, &top) != nil || top.StatusCode == nil {
		return false
	}
	n, ok := statusNumber(top.StatusCode)
	return ok && n == http.StatusNotFound
}

// errorCode reports whether an envelope's code, a JSON number or string,
// is not one of the success codes envelopeError lists.
func errorCode(raw json.RawMessage) bool {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		var n json.Number
		if json.Unmarshal(raw, &n) != nil {
			return false // null, a bool, an object: no code
		}
		s = n.String()
	}
	s = strings.ToLower(strings.TrimSpace(s))
	switch {
	case s == "", strings.Trim(s, "0") == "":
		return false
	case s == "200", s == "200000", s == "ok", s == "success":
		return false
	}
	return true
}

// errorStatus reports whether an envelope's "status" says an error: the
// words, or an HTTP error's number (400 to 599).
func errorStatus(raw json.RawMessage) bool {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		switch strings.ToLower(strings.TrimSpace(s)) {
		case "error", "fail", "failure":
			return true
		}
		return false
	}
	return httpError(raw)
}

// httpError reports whether raw, a JSON number or string of digits, is
// an HTTP error's number (400 to 599).
func httpError(raw json.RawMessage) bool {
	n, ok := statusNumber(raw)
	return ok && n >= 400 && n < 600
}

// statusNumber reads an envelope's status member, a JSON number or its
// digits in a string ("404").
func statusNumber(raw json.RawMessage) (int, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		raw = json.RawMessage(strings.TrimSpace(s))
	}
	var n int
	if json.Unmarshal(raw, &n) != nil {
		return 0, false
	}
	return n, true
}

// foundOrder reports whether body, a result query's 2xx answer the
// decoder could not read, holds key, which travels in the request's body,
// as a member's value (Binance's "clientOrderId": "ord-9", OKX's
// "data": [{"clOrdId": …}]), and carries no error as DecodeJSON reads
// one: the endpoint found the order. A list the filter was not applied
// to, or an empty one, names other orders or none.
func foundOrder(body []byte, key string) bool {
	body = bytes.TrimSpace(trimBOM(body))
	if len(body) == 0 || body[0] != '{' && body[0] != '[' || jsonKeyMember(key, body) == "" {
		return false
	}
	return !carriesError(body)
}

// saysKeyForgotten reports whether a result query's error body says the
// server no longer holds the idempotency key: it mentions the key and
// says "expired" or "no longer". A body that only says "not found" is
// no such word: replicas lag.
func saysKeyForgotten(body []byte) bool {
	return mentionsKey(body) && saysAny(body, "expired", "no longer")
}

// mentionsKey reports whether an error body is about the idempotency key
// ("Idempotency key reused with a different payload"), which tells a key
// conflict from a validation error that happens to share its status.
func mentionsKey(body []byte) bool {
	const word = "idempot"
	for _, b := range body {
		if b >= utf8.RuneSelf {
			// Unicode case folding (U+0130 lowers to 'i'): the general way.
			return bytes.Contains(bytes.ToLower(body), []byte(word))
		}
	}
	// ASCII only: fold in place of a lower-cased copy of every body.
	for i := 0; i+len(word) <= len(body); i++ {
		if body[i]|0x20 == word[0] && asciiFold(body[i:i+len(word)], word) {
			return true
		}
	}
	return false
}

// namesKey reports whether an error body is about the idempotency key:
// it mentions it (mentionsKey) or names the key by its name, for servers
// whose name for it does not say "idempotency": the header it is sent in
// (PayPal's 422 PAYPAL_REQUEST_ID_PREVIOUSLY_USED, "The PayPal-Request-Id
// has already been used for another request"), or the body member that
// holds it (keyField; Airwallex's request_id, "The same request ID has
// already been used"). name is empty when neither is known. The name is
// matched without regard to case, and '-', '_' and ' ' match one
// another: error codes spell a header name with underscores, messages a
// field's with spaces. It must stand as a word of its own: a member
// named "id" is not named by "invalid", nor by "customer_id" or a JSON
// Pointer's ".../customer/data/id" (another resource's), nor by a
// member of the error body holding an identifier (identMember). A header
// named with the old "X-" prefix is named without it too: MTN MoMo's 409
// RESOURCE_ALREADY_EXIST says "Duplicated reference id" of its
// X-Reference-Id (momodeveloper.mtn.com, Common Error Codes).
func namesKey(body []byte, name string) bool {
	if mentionsKey(body) {
		return true
	}
	return namesKeyAs(body, name) || namesKeyAs(body, unprefixed(name))
}

// unprefixed is a header name without its "X-" prefix, or "" when it has
// none or what is left is one word ("X-Key", "X-Token"): a word so
// common names no key.
func unprefixed(name string) string {
	if len(name) < 2 || lower(name[0]) != 'x' || name[1] != '-' || !strings.ContainsAny(name[2:], "-_") {
		return ""
	}
	return name[2:]
}

// namesKeyAs reports whether body names the key by name, as namesKey
// matches it.
func namesKeyAs(body []byte, name string) bool {
	for i := 0; name != "" && i+len(name) <= len(body); i++ {
		end := i + len(name)
		if sameName(body[i:end], name) && (i == 0 || !alnum(body[i-1]) && !joiner(body[i-1])) &&
			(end == len(body) || !alnum(body[end])) && !identMember(body, end) {
			return true
		}
	}
	return false
}

// sameName reports whether b spells the header name, as namesKey matches.
func sameName(b []byte, name string) bool {
	for i := range len(name) {
		if lower(b[i]) != lower(name[i]) && !(separator(b[i]) && separator(name[i])) {
			return false
		}
	}
	return true
}

// lower is c in lower case if it is an ASCII letter.
func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func separator(c byte) bool { return c == '-' || c == '_' || c == ' ' }

// saysKeyMissing reports whether a refusal's body says the request came
// without an idempotency key ("missing Idempotency-Key header", "an
// idempotency key is required"): idem sends one with every submit, so
// something in between dropped it, or the server wants another header.
func saysKeyMissing(body []byte) bool {
	return mentionsKey(body) && saysAny(body, "missing", "required", "not provided", "must be provided", "must be present", "absent")
}

// keyMissingHint follows the reason of a refusal that says the key was
// missing (saysKeyMissing).
const keyMissingHint = " (idem sent the key with this request: a proxy or gateway in between may drop the header, " +
	"or the server wants it under another name: WithKeyHeader)"

// reusesKey reports whether a 400's body says the idempotency key was
// used before with other parameters (Stripe's idempotency_error, Square's
// IDEMPOTENCY_KEY_REUSED, PayPal's DUPLICATE_REQUEST_ID), or used before
// at all (Xendit's legacy DUPLICATE_TRANSACTION_ERROR, "Idempotency key
// has been used before", its answer to a resend of what executed), not
// that it is missing or malformed: servers answer all three with 400, and
// only the first is a key conflict. name is as for namesKey.
func reusesKey(body []byte, name string) bool {
	if !namesKey(body, name) {
		return false
	}
	return saysAny(body, "reuse", "re-use", "same", "differ", "mismatch", "already", "previously", "used before", "duplicate")
}

// duplicateWords reports whether a refusal's body says the order or
// request is a duplicate, or that the body member holding the key (name,
// keyField's) is, without naming the key as namesKey does: order APIs
// whose key is a client order id answer the id sent again so (Binance's
// {"code":-2010,"msg":"Duplicate order sent."} and "ClientOrderId is
// duplicated.", KuCoin's "validation.createOrder.clientOidDuplicated",
// Alpaca's "client_order_id must be unique", "Order ID already exists",
// Rails' "Client order has already been taken",
// a database's unique constraint or index on the order's id passed on
// as it came, or one whose refused value is key: refusedValue). The word
// must stand beside what it is about: "duplicate line item", "duplicate
// email" and "items contains duplicate entries" are validation errors
// about the body, as is an order that "has" duplicate lines, or a member
// holding its parts ("order_lines", "payment_methods") named before the
// words of its error. name is empty when the key is not in the body: a
// key in a header is no order's field, and such a server's words name
// it.
// "Already paid" counts only if paying (paidVerb): saysDuplicateTo.
func duplicateWords(body []byte, name, key string, paying bool) bool {
	if name == "" {
		return false
	}
	if named, ours := refusedValue(string(body), name, key); named {
		return ours
	}
	// A message passed on in a JSON string has its line breaks escaped
	// (Prisma's "\nUnique constraint failed"): the 'n' is no part of
	// the next word.
	text := jsonBreaks.Replace(strings.ToLower(string(body)))
	split := func(r rune) bool { return r >= utf8.RuneSelf || !alnum(byte(r)) && r != '_' && r != '-' }
	words := strings.FieldsFunc(text, split)
	// FIX's ClOrdID (tag 11) is the client order id of APIs built on FIX
	// whatever their member is called (Crypto.com's DUPLICATE_CLORDID for
	// client_oid), behind a code's prefix too (Phemex's
	// TE_CL_ORD_ID_DUPLICATE), as duplicateSubject reads an id.
	about := func(w string) bool { return duplicateSubject(w, name) || strings.HasSuffix(bareName(w), "clordid") }
	human := humanName(name)
	done := func(v string) bool { return slices.Contains(alreadyVerbs[:], v) || paying && v == paidVerb }
	fieldsRead := false // Prisma's fields, below
	// clauseStart: the first word of the clause words[i] stands in, read
	// once and only for a refusal that says "already".
	var starts []bool
	clauseStart := func(i int) int {
		if starts == nil {
			starts = clauseOpeners(text, split)
		}
		return clauseFrom(starts, i)
	}
	// aboutBefore: the word ahead of words[i], past the verbs that join a
	// subject to "duplicated" or "unique" ("ClientOrderId is duplicated",
	// "client_order_id must be unique"), is the subject; so is an id
	// written as two words ("Order ID must be unique"), read as one, and
	// the key's member as Rails writes it in a full message ("External
	// has already been taken" for external_id).
	// The id itself may stand between its subject and the verbs, as
	// Interactive Brokers writes it: "Local order ID=<cOID> is already
	// registered.": it is passed over as they are, all its words (a cOID
	// is any string: "AAPL.buy:1" is three words here), never only the
	// last of them.
	// The key is passed over only where it stands as an id: one that is
	// no word (a digit or a sign in it: an order number "1001", "INV-A",
	// a UUID; or too long for one, distinctiveKey), or one after an id's
	// name ("ID=<cOID>"). A key of letters alone may be a common word
	// ("order", "email", "payment") and is read as the word it is:
	// passed over, "Order already exists" would lose its subject, and
	// "Order email is already registered" would find one.
	ownKey := strings.FieldsFunc(strings.ToLower(key), split)
	skipsKey := func(at int) bool {
		return !lettersOnly(key) || distinctiveKey(key) || at > 0 && slices.Contains(idWords[:], words[at-1])
	}
	aboutBefore := func(i int) bool {
		for i--; i >= 0; i-- {
			switch words[i] {
			case "is", "was", "are", "were", "be", "been", "has", "have", "must", "should", "not", "that", "which":
				continue
			}
			if n := len(ownKey); n > 0 && i+1 >= n && slices.Equal(words[i+1-n:i+1], ownKey) && skipsKey(i+1-n) {
				i -= n - 1
				continue
			}
			if qualifiedToken(words, i) {
				return false
			}
			return about(words[i]) || i > 0 && slices.Contains(idWords[:], words[i]) && about(words[i-1]+words[i]) ||
				len(human) > 0 && i+1 >= len(human) && slices.Equal(words[i+1-len(human):i+1], human)
		}
		return false
	}
	for i, w := range words {
		switch at := strings.Index(w, "duplicat"); {
		case at > 0: // one word: "clientOidDuplicated"
			// Or a code's name behind its prefix: Phemex's
			// OM_DUPLICATE_ORDERID, the prefix its order manager's.
			if about(w[:at]) || joinedDuplicate(w[at:], about) {
				return true
			}
		case at == 0:
			// "has duplicate entries" says what the subject holds, not
			// that it is one ("has been duplicated" still does).
			holds := i > 0 && (words[i-1] == "has" || words[i-1] == "have") && !strings.HasPrefix(w, "duplicated")
			if !holds && aboutBefore(i) || i+1 < len(words) && about(words[i+1]) {
				return true
			}
			if joinedDuplicate(w, about) {
				return true
			}
			if i+1 < len(words) && words[i+1] == "entry" && entryKeyIsOrders(words[i+2:min(i+12, len(words))], name) {
				return true
			}
		case w == "unique":
			if aboutBefore(i) {
				return true
			}
			// A database's refusal passed on as it came: PostgreSQL's
			// 23505 `duplicate key value violates unique constraint
			// "orders_order_id_key"`, SQLite's "UNIQUE constraint failed:
			// trade_orders.order_id" (v03413/BEpusdt#59, an order id sent
			// again): the constraint's name, or its column, is the subject.
			// A table of the order's parts is not the order: a line given
			// twice ("order_lines_pkey", PostgreSQL's <table>_pkey) or a
			// product twice on one order (SQLite's "failed: order_items.
			// order_id, order_items.product_id") is a plain failure.
			// Prisma's P2002 names the fields ("Unique constraint failed
			// on the fields: (`clientOrderId`)"), the key's member among
			// them, or the constraint ("on the constraint:
			// `Order_clientOrderId_key`", read as PostgreSQL's).
			if i+1 < len(words) && words[i+1] == "constraint" {
				cs := words[i+2 : min(i+5, len(words))]
				if rest := words[i+2:]; len(rest) > 4 && rest[0] == "failed" && rest[1] == "on" && rest[2] == "the" {
					switch rest[3] {
					case "fields":
						// prismaFields reads the body's first P2002, the
						// same whichever of them led here: once, not a
						// scan of the whole body for each.
						if !fieldsRead && slices.ContainsFunc(prismaFields(string(body)), func(f string) bool { return bareName(f) == bareName(name) }) {
							return true
						}
						fieldsRead = true
						continue
					case "constraint":
						cs = rest[4:5]
					}
				}
				if len(cs) > 1 && cs[0] == "failed" && !ownTable(cs[1], name) {
					continue
				}
				for _, c := range cs {
					if table, pkey := strings.CutSuffix(c, "_pkey"); pkey && ownTable(table, name) || !pkey && about(c) && !partsTable(c) {
						return true
					}
				}
			}
		case w == "already" && i+1 < len(words):
			next := words[i+1]
			if next == "been" && i+2 < len(words) {
				next = words[i+2]
			}
			// "taken": Rails' uniqueness error as a full message ("Client
			// order has already been taken", its attribute's name without
			// "_id").
			// Or the subject named with the id it is held by ("An order
			// with this reference already exists"), or, paid, an invoice
			// (paidInvoice).
			if done(next) && (aboutBefore(i) || heldWith(words[:i], about) || next == paidVerb && paidInvoice(words[:i])) &&
				!refusedForState(words[clauseStart(i):i], next) {
				return true
			}
		case w == "same" && i >= 2 && words[i-1] == "the" && words[i-2] == "with":
			// An id the server holds, in the words of what it holds "with
			// the same" one: LINE Pay's 1172, "There is a record of
			// transaction with the same order number." to an orderId it
			// holds (developers.line.biz, LINE Pay error codes). Only an
			// id: "with the same order" or "currency" names no key.
			if sameID(words[i+1:], about) {
				return true
			}
		case (w == "utilized" || w == "utilised") && i > 1 && words[i-1] == "and" && words[i-2] == "paid" && aboutBefore(i-2):
			// Midtrans's 406 "order_id has been paid and utilized, please
			// use another order ID" to an order_id that "is currently
			// active or has been paid previously" (docs.midtrans.com/docs/
			// error-code-and-response-code): its "Duplicate order ID" in
			// other words.
			return true
		case (w == "conflict" || w == "conflicts") && i > 0 && bareName(words[i-1]) == bareName(name):
			// The key's own member said to clash: Bitvavo's 400
			// {"errorCode":220,"error":"clientOrderId conflict within the
			// market."} to a clientOrderId its open order holds
			// (docs.bitvavo.com/docs/errors). Only that member: an
			// "order conflict" may be about anything the order holds.
			return true
		case joinedAlready(w, about, done), joinedUnique(w, about):
			return true
		}
	}
	return false
}

// joinVerbs join a subject to "already" ("Invoice is already paid",
// "has already been taken").
var joinVerbs = [...]string{"is", "was", "are", "were", "has", "have", "been"}

// beforeVerbs is before, the words ahead of "already", without the
// joinVerbs that end it.
func beforeVerbs(before []string) []string {
	for len(before) > 0 && slices.Contains(joinVerbs[:], before[len(before)-1]) {
		before = before[:len(before)-1]
	}
	return before
}

// heldWith reports whether before, the words ahead of "already", end in
// a subject (about) named with the id it is held by, "with this" or "with
// the same" one of idWords: "An order with this reference already
// exists" (Paxos's Already Exists to an order's ref_id used before).
func heldWith(before []string, about func(string) bool) bool {
	before = beforeVerbs(before)
	n := len(before)
	if n < 4 || !slices.Contains(idWords[:], before[n-1]) {
		return false
	}
	j := n - 2
	switch {
	case before[j] == "this" || before[j] == "that":
		j--
	case before[j] == "same" && before[j-1] == "the":
		j -= 2
	default:
		return false
	}
	return j >= 1 && before[j] == "with" && about(before[j-1])
}

// paidInvoice reports whether before, the words ahead of "already paid",
// end in an invoice: "Invoice is already paid", "The invoice has already
// been paid", a payment's refusal as an order's "already paid" is.
func paidInvoice(before []string) bool {
	before = beforeVerbs(before)
	return len(before) > 0 && (before[len(before)-1] == "invoice" || before[len(before)-1] == "invoices")
}

// sameID reports whether words start with an id of the subject (about):
// one word ending in one of idWords ("transactionId") or two, the second
// of them ("order number").
func sameID(words []string, about func(string) bool) bool {
	if len(words) > 1 && slices.Contains(idWords[:], words[1]) && about(words[0]+words[1]) {
		return true
	}
	return len(words) > 0 && about(words[0]) &&
		slices.ContainsFunc(idWords[:], func(s string) bool { return strings.HasSuffix(bareName(words[0]), s) })
}

// joinedDuplicate reports whether w, one word of a refusal that starts
// with "duplicate", is a code's name joining it to its subject (about):
// by '_' or '-' (Crypto.com's "DUPLICATE_CLORDID") or in one word,
// lower-cased ("DuplicateClientOrderId", Nobitex's code for a
// clientOrderId it holds), "duplicated" or "duplicates" too.
func joinedDuplicate(w string, about func(string) bool) bool {
	rest, ok := strings.CutPrefix(w, "duplicate")
	if !ok {
		return false
	}
	for _, s := range [...]string{rest, strings.TrimPrefix(rest, "d"), strings.TrimPrefix(rest, "s")} {
		if s = strings.TrimLeft(s, "_-"); s != "" && about(s) {
			return true
		}
	}
	// Or the code's last part, the words between saying which kind:
	// PayPay's 400 DUPLICATE_DYNAMIC_QR_REQUEST to a merchantPaymentId it
	// holds (its OPA SDKs' error table). A part ahead of it that places
	// the duplicate inside it ("duplicate_field_in_request") names no
	// duplicate of it.
	parts := strings.FieldsFunc(rest, func(r rune) bool { return r == '_' || r == '-' })
	if n := len(parts); n > 1 && about(parts[n-1]) {
		return !slices.ContainsFunc(parts[:n-1], func(p string) bool { return slices.Contains(placeWords[:], p) })
	}
	return false
}

// placeWords put what is duplicated inside the code's subject, not say it
// is one.
var placeWords = [...]string{"in", "of", "on", "for", "within", "inside"}

// alreadyVerbs follow "already" in a refusal of what exists ("Order ID
// already exists", "has already been taken", PayU India's "Request is
// already logged" to a refund token it holds, Paytm's "Refund Already
// Raised" and "Refund is already Successful" to a refId it holds, Toss
// Payments' "This is a payment that has already been processed." to a
// confirmation of a payment it confirmed, Interactive Brokers' "Local
// order ID=<cOID> is already registered." to a cOID it holds).
var alreadyVerbs = [...]string{"exists", "exist", "used", "placed", "submitted", "sent", "taken", "logged", "raised", "successful", "processed", "registered"}

// paidVerb follows "already" in a refusal of an order paid ("Order
// already paid"): to a payment, a copy of it may have paid the order (a
// duplicate, as alreadyVerbs' are); to a request changing the order's
// state (a cancel, a refund: changesState), whose copy pays nothing, the
// order's state refused it.
const paidVerb = "paid"

// changesState reports whether rawURL's last path segment (pathSegments:
// not the key) names an action on an object's state, one of stateVerbs
// (".../cancel", "/refunds", "/reversals"): no copy of it pays.
func changesState(rawURL, key string) bool {
	segs := pathSegments(rawURL, key)
	if len(segs) == 0 {
		return false
	}
	last := strings.ToLower(segs[len(segs)-1])
	return slices.ContainsFunc(stateVerbs[:], func(v string) bool { return strings.HasPrefix(last, strings.TrimSuffix(v, "e")) })
}

// saysDuplicateTo is duplicateWords of a refusal of rec: "already paid"
// is a duplicate's words only to a request that may pay (changesState).
func saysDuplicateTo(rec *journal.Record, body []byte, name string) bool {
	return duplicateWords(body, name, rec.Key, !changesState(rec.URL, rec.Key))
}

// paidRefusal reports whether a refusal of rec says the order is paid
// already (paidVerb) and nothing of the key: a 409 the classifier took
// for the key in flight, a Conflict (a 422), or a 400. name is the key's
// header: a server keeping its idempotency store by it answers a copy of
// ours under the key from the store, not with the order's state. Words
// naming the key, or saying the key's request or the order's payment
// runs, are about the key or what runs, never this. exists: the refusal
// is a 409 to a create (not changesState) saying the order exists or is
// a duplicate (duplicateWords without paying, about an order: orderDuplicate;
// Paxos's 409 Already Exists to an order's ref_id used before), which
// such a server, its key in a header, says of the order's reference, not
// of the key: it checked the order before the key, and the order may be
// a copy of ours. A 422 or 400 saying so stays the key's "already used"
// (keyConflict); a 409 saying a request is a duplicate, the key's in
// flight.
func paidRefusal(rec *journal.Record, v Verdict, status int, body []byte, name string) (ok, exists bool) {
	if !(v == Processing && status == http.StatusConflict || v == Conflict || v == Rejected && status == http.StatusBadRequest) {
		return false, false
	}
	if namesKey(body, name) || saysKeyRunning(body, name) || saysSubjectRunning(body) {
		return false, false
	}
	if duplicateWords(body, name, rec.Key, false) {
		exists = status == http.StatusConflict && !changesState(rec.URL, rec.Key) && orderDuplicate(body, name, rec.Key) &&
			!keyWorded(body, rec.Key)
		return exists, exists
	}
	// Words of the key's request are the key's in flight here too: "An
	// order with this key is already paid", "…, retry later".
	return duplicateWords(body, name, rec.Key, true) && !keyWorded(body, rec.Key), false
}

// lettersOnly reports whether s is ASCII letters alone: a word, as a
// key may be, not an id made of digits or signs.
func lettersOnly(s string) bool {
	return s != "" && !strings.ContainsFunc(s, func(r rune) bool { return r < 'A' || r > 'z' || r > 'Z' && r < 'a' })
}

// qualifiedToken reports whether words[i] is the token of a device or a
// credential ("device token", "push token", "access token"), which a
// request registers or presents and no order or payment is made under:
// "Device token is already registered" refuses the registration of what
// is, not a copy of a charge. A payment instrument's token ("card token
// already used") may have been spent by a copy of ours, and PayU India's
// refund token is the key itself: both stay subjects.
func qualifiedToken(words []string, i int) bool {
	return (words[i] == "token" || words[i] == "tokens") && i > 0 && slices.Contains(credentialNouns[:], words[i-1])
}

// credentialNouns qualify a token that is a device's or a credential's.
var credentialNouns = [...]string{"device", "push", "fcm", "apns", "gcm", "access", "refresh", "api", "auth", "bearer", "session",
	"csrf", "reset", "verification", "registration", "id"}

// stateVerbs act on what exists and undo or alter it, unlike the verbs
// that make it (create, place, submit) or carry it on (capture, settle,
// release: a copy of a capture leaves a payment "processed"): a refusal
// that one of them "cannot" be done to a subject already in some other
// state refuses the request for that state.
var stateVerbs = [...]string{"cancel", "void", "refund", "reverse", "update", "modify", "edit", "change", "amend",
	"delete", "remove", "close", "expire", "reject", "decline", "dispute", "reopen"}

// clauseOpeners reports, for each word of text as split makes them,
// whether a clause opens with it: a sentence's end, a colon or
// semicolon, or a JSON or XML bound stands between it and the word
// before. A period or colon inside a name ("customer.id", "AAPL.buy:1")
// ends nothing.
func clauseOpeners(text string, split func(rune) bool) []bool {
	var opens []bool
	inWord, mark := false, true
	for i, r := range text {
		if !split(r) {
			if !inWord {
				opens = append(opens, mark)
			}
			inWord, mark = true, false
			continue
		}
		inWord = false
		switch r {
		case '.', ':', '!', '?':
			if next := i + 1; next >= len(text) || !alnum(text[next]) {
				mark = true
			}
		case ';', '"', '{', '}', '[', ']', '<', '>':
			mark = true
		}
	}
	return opens
}

// stateReach is how many words ahead of its "already" refusedForState
// reads.
const stateReach = 8

// clauseFrom is the first word of the clause that word i stands in, as
// starts (clauseOpeners) marks them, no further back than stateReach:
// refusedForState reads no more, and a walk to the clause's start, for
// each "already" of a long answer with no sentence's end in it, took
// time growing as the square of its length.
func clauseFrom(starts []bool, i int) int {
	for lo := max(0, i-stateReach); i > lo && i < len(starts) && !starts[i]; i-- {
	}
	return i
}

// refusedForState reports whether before, the words of a refusal's
// clause ahead of its "already", say that a verb of stateVerbs cannot be done to the
// subject, the verb not the one done already (done): "Cannot cancel a
// payment that has already been processed." refuses a cancel for the
// payment's state, which no copy of the cancel brought about: nothing
// ran, a plain failure. "Cannot refund a payment that has already been
// refunded" may be a copy's doing, and stays a duplicate.
func refusedForState(before []string, done string) bool {
	// Close to the "already" too: a "cannot" far back in a long clause
	// is about something else.
	for j := len(before) - 1; j >= max(0, len(before)-stateReach); j-- {
		at := 0 // the verb's index
		switch {
		case before[j] == "cannot" && j+1 < len(before):
			at = j + 1
		case before[j] == "can" && j+2 < len(before) && (before[j+1] == "not" || before[j+1] == "t"):
			at = j + 2
		case before[j] == "unable" && j+2 < len(before) && before[j+1] == "to":
			at = j + 2
		default:
			continue
		}
		verb := before[at]
		stem := strings.TrimSuffix(verb, "e")
		if !slices.Contains(stateVerbs[:], verb) || strings.HasPrefix(done, stem) {
			return false
		}
		// "Unable to refund: refund request already raised", or Paytm's
		// "Refund Already Raised" after it, says the request's own action
		// is done already, which a copy of it may have done: a
		// duplicate, not a state it was refused for.
		for _, w := range before[at+1:] {
			if strings.HasPrefix(w, stem) || w == "request" || w == "requests" {
				return false
			}
		}
		return true
	}
	return false
}

// joinedAlready reports whether w, one word of a refusal, is a code's name
// joining its subject (about) to "already" and one of alreadyVerbs: Kraken
// Futures' sendStatus "clientOrderIdAlreadyExist", lower-cased, or
// "CLIENT_ORDER_ID_ALREADY_EXISTS"; or the subject last, after the verb:
// Toss Payments' ALREADY_PROCESSED_PAYMENT, which comes with words of
// its own in Korean only unless asked for English
// (docs.tosspayments.com/reference/error-codes). Read apart, its words
// are one duplicateWords takes.
func joinedAlready(w string, about, done func(string) bool) bool {
	at := strings.Index(w, "already")
	if at == 0 {
		rest := strings.TrimLeft(w[len("already"):], "_-")
		sep := strings.IndexAny(rest, "_-")
		return sep > 0 && done(rest[:sep]) && about(rest[sep+1:])
	}
	if at < 0 || !done(strings.Trim(w[at+len("already"):], "_-")) {
		return false
	}
	return about(strings.Trim(w[:at], "_-"))
}

// joinedUnique reports whether w, one word of a refusal, is a code's name
// saying its subject (about) is not unique: PayU's 400
// ERROR_ORDER_NOT_UNIQUE to an extOrderId it holds, lower-cased, which
// comes with no words of its own (developers.payu.com, Status Codes), or
// ORDER_ID_NOT_UNIQUE. The subject is the code's last part or parts
// before "not_unique": a prefix ("error_") is no part of it, and
// "email_not_unique" or "order_lines_not_unique" names no subject.
func joinedUnique(w string, about func(string) bool) bool {
	var rest string
	var ok bool
	for _, suffix := range [...]string{"not_unique", "not-unique", "notunique"} {
		if rest, ok = strings.CutSuffix(w, suffix); ok {
			break
		}
	}
	if rest = strings.TrimRight(rest, "_-"); !ok || rest == "" {
		return false
	}
	for {
		if about(rest) {
			return true
		}
		i := strings.IndexAny(rest, "_-")
		if i < 0 {
			return false
		}
		rest = rest[i+1:]
	}
}

// jsonBreaks blanks the escaped line breaks and tabs of a JSON string.
var jsonBreaks = strings.NewReplacer(`\n`, " ", `\r`, " ", `\t`, " ")

// duplicateSubject reports whether w, a lower-cased word of a refusal, is
// what duplicateWords's word must stand beside: the order or request
// itself, or the member holding the key (name), separators aside.
func duplicateSubject(w, name string) bool {
	if w == "" {
		return false
	}
	b := bareName(w)
	if b == bareName(name) || b == "uuid" {
		// A UUID alone is the request's own identifier, which a copy of
		// the same bytes carries: Trustly's params.UUID, refused 688
		// ERROR_DUPLICATE_UUID, "This UUID has been used before", to a
		// copy of a call that paid out (eu.developers.trustly.com, Error
		// messages). Another thing's is named with it ("beneficiary_uuid").
		return true
	}
	// A longer word naming one is the subject only as its id
	// ("ClientOrderId", "transaction_id"): "order_lines" and
	// "payment_methods", members a validation error names, are parts of it.
	id := slices.ContainsFunc(idWords[:], func(s string) bool { return strings.HasSuffix(b, s) })
	for _, s := range subjects[:] {
		if b == s || b == s+"s" || id && strings.Contains(b, s) {
			return true
		}
	}
	return false
}

// bareName is s in lower case without the separators that namesKey
// matches one for another: client_order_id, Client-Order-Id and
// ClientOrderId are one name.
func bareName(s string) string {
	return strings.Map(func(r rune) rune {
		if r < utf8.RuneSelf && separator(byte(r)) {
			return -1
		}
		return r
	}, strings.ToLower(s))
}

// entryKeyIsOrders reports whether the words after MySQL's "Duplicate
// entry" (error 1062 passed on as it came: "Duplicate entry 'ord-7' for
// key 'orders.order_id'") name a unique index on the order's id: since
// 8.0.19 the index is written table.index, and one on a single column
// takes the column's name; before, the index alone ('order_id').
func entryKeyIsOrders(words []string, name string) bool {
	for j := 0; j+2 < len(words); j++ {
		if words[j] != "for" || words[j+1] != "key" {
			continue
		}
		index := words[j+2]
		if j+3 < len(words) && ownTable(index, name) && duplicateSubject(words[j+3], name) {
			return true
		}
		// The index alone, unless it is a table's name ('orders.email').
		return duplicateSubject(index, name) && !duplicateSubject(lastPart(index), "")
	}
	return false
}

// partsTable reports whether a constraint's name, PostgreSQL's
// <table>_<columns>_key, starts with a table of the order's parts: the
// subject in the singular, then a noun its parts go by
// ("order_items_order_id_product_id_key", a product twice on one order;
// Prisma's model "OrderItem_orderId_productId_key"). The order's own table is plural ("orders_merchant_id_client_order_id_key")
// or, as Prisma names it, the model followed by a column
// ("Order_clientOrderId_key"); a noun not listed ("payment_intents") is
// taken for the order's own: read as a part, a refusal of our copy would
// be a plain failure.
func partsTable(constraint string) bool {
	words := strings.Split(constraint, "_")
	if len(words) > 1 && slices.Contains(subjects[:], words[0]) && slices.Contains(partNouns[:], words[1]) {
		return true
	}
	// Prisma's model in one word: OrderItem_orderId_productId_key.
	for _, s := range subjects {
		if rest, ok := strings.CutPrefix(words[0], s); ok && slices.Contains(partNouns[:], rest) {
			return true
		}
	}
	return false
}

// prismaFields are the fields Prisma's P2002 names in its message
// ("Unique constraint failed on the fields: (`merchantId`,`clientOrderId`)",
// prisma/orm#4350), or nil.
func prismaFields(text string) []string {
	_, rest, ok := strings.Cut(text, "failed on the fields: (")
	if !ok {
		return nil
	}
	list, _, _ := strings.Cut(rest, ")")
	fields := strings.Split(list, ",")
	for i, f := range fields {
		fields[i] = strings.Trim(f, "` ")
	}
	return fields
}

// partNouns name the rows an order or payment is made of.
var partNouns = [...]string{"item", "items", "line", "lines", "entry", "entries", "product", "products", "detail", "details", "method", "methods", "fee", "fees"}

// humanName is the key's member (name) as Rails' full messages write it,
// in lower-case words: humanize drops a trailing "_id" and turns '_'
// into spaces (external_id: "External"). nil for a member without '_'
// ("clientOrderId"; duplicateSubject reads it as one word) or for "id".
func humanName(name string) []string {
	base, ok := strings.CutSuffix(strings.ToLower(name), "_id")
	if !ok || base == "" {
		return nil
	}
	return strings.Split(base, "_")
}

// refusedValue reads a database's unique violation passed on as it came
// for the value it refused:
//   - MySQL's 1062, "Duplicate entry 'ord-7' for key 'orders.PRIMARY'"
//     (go-sql-driver's and mysql2's text);
//   - PostgreSQL's 23505 DETAIL, "Key (merchant_id, reference)=(42,
//     ord-7) already exists." (in psycopg2's text);
//   - SQL Server's 2627 and 2601, "… Cannot insert duplicate key in
//     object 'dbo.orders'. The duplicate key value is (ord-7).";
//   - MongoDB's E11000, "… index: _id_ dup key: { _id: "ord-7" }".
//
// named is false when the body names none; then, or when the answer is
// not clear, the index or constraint's name is all there is. The row is
// ours when the value is key or a composite's part is, when a distinctive
// key (distinctiveKey) stands in it as a token (a UUID key also as a
// database writes it back: uuidTexts), or when a column (or
// MySQL's single-column index) is the key's member (name). It is
// another's when the value does not hold the key and no column is named
// for the order's id: "Key (id)=(1234)" on orders_pkey, a primary key's
// sequence out of step with its table (our order not made), or "for key
// 'orders.PRIMARY'", and the value is row numbers (rowNumbers). A column
// that is ("order_id") may hold our key in another form (a prefix,
// BINARY(16)), as may any column a value the server derived from it (a
// hash, a uuid5), so then its index's name is read as before.
func refusedValue(text, name, key string) (named, ours bool) {
	var value, columns, sep string
	if _, rest, ok := strings.Cut(text, "Duplicate entry '"); ok {
		v, rest, ok := strings.Cut(rest, "' for key '")
		if !ok {
			return false, false
		}
		index, _, _ := strings.Cut(rest, "'")
		// Its values are joined by '-', which ids hold too: not split.
		value, columns = v, index[strings.LastIndexByte(index, '.')+1:]
	} else if _, rest, ok := strings.Cut(text, "Key ("); ok {
		c, rest, ok := strings.Cut(rest, ")=(")
		if !ok {
			return false, false
		}
		if value, _, ok = strings.Cut(rest, ") already exists"); !ok {
			return false, false
		}
		columns, sep = c, ", "
	} else if _, rest, ok := strings.Cut(text, "dup key: {"); ok {
		// MongoDB's E11000: "{ merchantId: 42, ref: \"ord-7\" }", the
		// fields unnamed before 4.2 ("{ : \"ord-7\" }").
		doc, _, ok := strings.Cut(rest, "}")
		if !ok {
			return false, false
		}
		var cols, vals []string
		for _, kv := range strings.Split(doc, ", ") {
			k, v, _ := strings.Cut(kv, ":")
			cols, vals = append(cols, strings.TrimSpace(k)), append(vals, strings.Trim(v, ` "\`))
		}
		columns, value, sep = strings.Join(cols, ","), strings.Join(vals, ", "), ", "
	} else if _, rest, ok := strings.Cut(text, "The duplicate key value is ("); ok {
		// SQL Server's 2627 and 2601 name no column.
		if value, _, ok = strings.Cut(rest, ")"); !ok {
			return false, false
		}
		sep = ", "
	} else {
		return false, false
	}
	subject := false
	for _, c := range strings.Split(columns, ",") {
		c = strings.Trim(c, ` "\`)
		if bareName(c) == bareName(name) {
			return true, true
		}
		subject = subject || duplicateSubject(c, name)
	}
	// A database keeps a UUID key in a form of its own, whatever form it
	// read.
	token := keyToken(value, key)
	if canonical, hex := uuidTexts(key); canonical != "" {
		token = token || keyToken(value, canonical) || keyToken(value, hex)
	}
	switch {
	case value == key || sep != "" && slices.Contains(strings.Split(value, sep), key), token && distinctiveKey(key):
		return true, true
	case token || subject:
		return false, false
	case !rowNumbers(value, sep):
		// Not the server's own row numbers: possibly ours in a form it
		// derived (a hash of it, a uuid5 of it, another encoding), which
		// no token match finds. Its index's name decides, as before.
		return false, false
	}
	return true, false
}

// rowNumbers reports whether value, a refused key's value (a composite's
// parts joined by sep, or by MySQL's '-' when sep is empty), is made of
// decimal numbers only: rows a sequence numbered, such as a primary key's
// sequence out of step with its table, never a client's order id.
func rowNumbers(value, sep string) bool {
	if sep == "" {
		sep = "-"
	}
	for _, part := range strings.Split(value, sep) {
		if part == "" || strings.ContainsFunc(part, func(r rune) bool { return r < '0' || r > '9' }) {
			return false
		}
	}
	return true
}

// uuidTexts are key, when it is a UUID in any form a uuid type reads
// (PostgreSQL's manual, "UUID Type": upper-case digits, braces, hyphens
// left out or after any group of four; Python's uuid4().hex has none),
// as databases write it back: canonical, 8-4-4-4-12 in lower case, as
// PostgreSQL's uuid type (and MariaDB's) does; hex, its 32 digits alone,
// as Django's UUIDField keeps it in char(32) on other databases (Django's
// manual, "UUIDField"). Both "" when key is no UUID.
func uuidTexts(key string) (canonical, hex string) {
	h := strings.ToLower(strings.ReplaceAll(strings.TrimSuffix(strings.TrimPrefix(key, "{"), "}"), "-", ""))
	if len(h) != 32 || strings.ContainsFunc(h, func(r rune) bool { return !('0' <= r && r <= '9' || 'a' <= r && r <= 'f') }) {
		return "", ""
	}
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:], h
}

// keyToken reports whether key stands in s as a whole token, ignoring
// case: not inside a longer word or number ("ord-7" in "42-ord-7" and
// "m42_ord-7", not in "ord-70").
func keyToken(s, key string) bool {
	s, key = strings.ToLower(s), strings.ToLower(key)
	for i := 0; key != ""; {
		at := strings.Index(s[i:], key)
		if at < 0 {
			return false
		}
		start, end := i+at, i+at+len(key)
		if (start == 0 || !wordByte(s[start-1])) && (end == len(s) || !wordByte(s[end])) {
			return true
		}
		i = start + 1
	}
	return false
}

func wordByte(c byte) bool { return alnum(c) || c >= utf8.RuneSelf }

// distinctiveKey reports whether key, found as a token among other
// values, is telling: at least five characters mixing letters and digits
// (a generated id: "ord-7", a UUID), or sixteen or more (a snowflake id).
// A short number is what other columns hold too (a row id from another
// sequence, a quantity, a product id), and a short word may be a status
// or a currency.
func distinctiveKey(key string) bool {
	letter := strings.ContainsFunc(key, func(r rune) bool { return 'a' <= r|0x20 && r|0x20 <= 'z' })
	digit := strings.ContainsFunc(key, func(r rune) bool { return '0' <= r && r <= '9' })
	return len(key) >= 16 || len(key) >= 5 && letter && digit
}

// ownTable reports whether a database table is the order's own, named
// for it ("orders", "trade_orders") or for the key's member, not one of
// its parts ("order_lines", "order_items"): the subject is the table's
// last word.
func ownTable(table, name string) bool {
	return duplicateSubject(table, name) || duplicateSubject(lastPart(table), name)
}

// lastPart is a snake_case name's last word: a table's noun ("trade_orders").
func lastPart(s string) string { return s[strings.LastIndexByte(s, '_')+1:] }

// subjects are what a duplicate is of when it is the key's: the order or
// request itself, in the singular (a refund API's refund: Paytm's
// "Refund Already Raised" to a refId it holds), or the name an API gives
// the key that identifies it (PayU India's refund "Token ID", its var2:
// "Token already exists" to a token it holds).
var subjects = [...]string{"order", "request", "transaction", "payment", "payout", "transfer", "refund", "token"}

// idWords end a word that names the subject's id ("transaction_id",
// "ClientOrderId"), or stand after it ("Order ID"), not a part of it
// ("order_lines").
var idWords = [...]string{"id", "ids", "ref", "reference", "key", "number"}

// saysRequestDiffers reports whether a key conflict's body says this
// request is not the one the key was first used with (Stripe's "same
// parameters", Square's "same request data", PayFacto's "does not
// match", EC2's "non-identical", "a different payload"), not only that
// the key was used ("already exists", "duplicate_request"). A "different"
// that names the key ("try again with a different request ID") is about
// the key a new request should take, not this one. name is as for
// namesKey.
func saysRequestDiffers(body []byte, name string) bool {
	text := bytes.ToLower(body)
	if containsAny(text, "mismatch", "not match", "n't match", "non-identical", "not identical", "conflicting ", "same parameters",
		"same request data", "same request body", "same payload", "same body", "other parameters", "other request", "other payload") {
		return true
	}
	for i := 0; ; {
		at := bytes.Index(text[i:], []byte("differ"))
		if at < 0 {
			return false
		}
		i += at + len("differ")
		for i < len(text) && 'a' <= text[i] && text[i] <= 'z' {
			i++
		}
		if !namesTheKey(text[i:], name) {
			return true
		}
	}
}

// namesTheKey reports whether rest, the lower-cased text after a word,
// goes on with a name for the key: "key", "idempotency key", "request
// ID", "token", or the key's own name as namesKey reads it, an "X-"
// header's without its prefix too ("a different reference id" for
// X-Reference-Id).
func namesTheKey(rest []byte, name string) bool {
	rest = bytes.TrimLeft(rest, " _-")
	for _, n := range [...]string{name, unprefixed(name)} {
		if n != "" && len(rest) >= len(n) && sameName(rest[:len(n)], n) {
			return true
		}
	}
	word := func(b []byte) (string, []byte) {
		n := 0
		for n < len(b) && alnum(b[n]) {
			n++
		}
		return string(b[:n]), bytes.TrimLeft(b[n:], " _-")
	}
	w, rest := word(rest)
	switch w {
	case "key", "keys", "idempotency", "idempotent", "id", "ids", "uuid", "token":
		return true
	case "request":
		w, _ = word(rest)
		return w == "id" || w == "ids" || w == "identifier" || w == "token" || w == "key"
	}
	return false
}

// orderDuplicate reports whether body's duplicate (duplicateWords, not
// paying) is the order's: it holds with the word "order" (or "orders",
// alone or a part of a code's name: ORDER_ALREADY_EXISTS, order_id) and
// not without it. One about the request, which to a server keeping the
// key may be the key's own ("Duplicate request", "Request already
// processed"), holds without it, whatever else names an order: an RFC
// 9457 problem's instance, the request's path ("/v1/orders"), as
// Spring's ProblemDetail fills it; an order_id member beside it.
func orderDuplicate(body []byte, name, key string) bool {
	out := bytes.Clone(body)
	said := false
	for i := 0; i < len(out); {
		j := i
		for j < len(out) && (out[j]|0x20) >= 'a' && (out[j]|0x20) <= 'z' {
			j++
		}
		if w := strings.ToLower(string(out[i:j])); w == "order" || w == "orders" {
			said = true
			copy(out[i:j], bytes.Repeat([]byte(" "), j-i))
		}
		i = j + 1
	}
	return said && !duplicateWords(out, name, key, false)
}

// keyWorded reports whether an order's duplicate (orderDuplicate) may
// be the key's after all, another request holding it: the body says
// "key" or "idempotency" ("An order with this key already exists"),
// gives the key's value when that is telling (distinctiveKey: a
// request_id holding it), names a request ("for this request", "A
// request for this order"), says "processed" (as "Request already
// processed" is the key's), or says something runs, is to be retried or
// is in flight ("is processing", "pending", "retry later", "concurrent
// submission"), which saysSubjectRunning reads only at a clause's head.
// An order that exists, or is paid, is none of these.
func keyWorded(body []byte, key string) bool {
	if distinctiveKey(key) && bytes.Contains(body, []byte(key)) {
		return true
	}
	// A member or code in snake_case is one word: Stripe's
	// "invalid_request_error", a "request_id" or an order's
	// "PENDING_PAYMENT" say nothing of the key (its value, in one, is
	// found above).
	words := strings.FieldsFunc(strings.ToLower(string(body)), func(r rune) bool { return r >= utf8.RuneSelf || !alnum(byte(r)) && r != '_' })
	return slices.ContainsFunc(words, func(w string) bool { return slices.Contains(keyWords[:], w) })
}

// keyWords are keyWorded's words.
var keyWords = [...]string{"key", "keys", "idempotency", "idempotent", "request", "requests", "processed", "process",
	"processing", "pending", "progress", "inprogress", "running", "retry", "retrying", "later", "locked", "concurrent",
	"concurrently", "flight", "inflight", "ongoing"}

// saysAny reports whether body contains any of words (lower case),
// ignoring case.
func saysAny(body []byte, words ...string) bool {
	return containsAny(bytes.ToLower(body), words...)
}

// containsAny reports whether text, already in lower case, contains any
// of words.
func containsAny(text []byte, words ...string) bool {
	for _, w := range words {
		if bytes.Contains(text, []byte(w)) {
			return true
		}
	}
	return false
}

// createdResource is the resource a refusal says its key already
// created, and its status when the refusal gives one. Servers that never
// replay answer every later request with the key so:
//   - GoCardless, a create resent after it succeeded: a 409 whose reason
//     is idempotent_creation_conflict and whose links name the resource;
//   - Primer, any request after the key's was processed, a declined
//     payment's too: a 409 whose errorId is IdempotencyKeyAlreadyExists
//     (400 TransactionRequestIdempotencyKeyAlreadyExists before), with
//     the payment's paymentId and paymentStatus;
//   - Banking Circle's direct debits, any request after the key's was
//     accepted: a 400 whose message says "IdempotencyKey <key> was
//     already used at <time> creating entity <id>.".
//   - Moov's transfers, any create after the key's: a 409 whose body is
//     the key's transfer itself, with its transferID, createdOn and
//     status (https://docs.moov.io/guides/money-movement/manage-transfers/:
//     "returns a 409 with the original transfer in the body").
//
// Empty for any other answer, and for one that names no resource: only
// the resource makes the answer final.
//
// collection: the path segment that names the resource's kind, when the
// shape says what it names (Primer's a payment, Moov's a transfer).
func createdResource(status int, body []byte) (id, state, collection string) {
	for _, r := range createdReaders {
		if id, state = r.read(status, body); id != "" {
			return id, state, r.collection
		}
	}
	return "", "", ""
}

// createdReaders read createdResource's answers, one shape each.
var createdReaders = [...]struct {
	read       func(status int, body []byte) (id, state string)
	collection string
}{{gocardlessCreated, ""}, {primerPayment, "payments"}, {bankingCircleEntity, ""}, {moovTransfer, "transfers"}}

// memberActedOn is the id a request to a path of segments (pathSegments)
// names in collection before an action's segment, the member of it the
// request acts on (POST /payments/{id}/refund); "" for a create (POST
// /payments) or an empty collection.
func memberActedOn(segments []string, collection string) string {
	for i := 0; collection != "" && i+2 < len(segments); i++ {
		if strings.EqualFold(segments[i], collection) {
			return segments[i+1]
		}
	}
	return ""
}

// gocardlessCreated reads createdResource's GoCardless answer.
func gocardlessCreated(status int, body []byte) (id, state string) {
	const reason = "idempotent_creation_conflict"
	if status != http.StatusConflict || !bytes.Contains(body, []byte(reason)) {
		return "", ""
	}
	var v struct {
		Error struct {
			Errors []struct {
				Reason string `json:"reason"`
				Links  struct {
					Resource string `json:"conflicting_resource_id"`
				} `json:"links"`
			} `json:"errors"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &v) != nil {
		return "", ""
	}
	for _, e := range v.Error.Errors {
		if e.Reason == reason && e.Links.Resource != "" {
			return e.Links.Resource, ""
		}
	}
	return "", ""
}

// primerPayment reads createdResource's Primer answer.
func primerPayment(status int, body []byte) (id, state string) {
	const code = "IdempotencyKeyAlreadyExists"
	if status != http.StatusConflict && status != http.StatusBadRequest || !bytes.Contains(body, []byte(code)) {
		return "", ""
	}
	var v struct {
		Error struct {
			ErrorID       string `json:"errorId"`
			PaymentID     string `json:"paymentId"`
			PaymentStatus string `json:"paymentStatus"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &v) != nil || !strings.HasSuffix(v.Error.ErrorID, code) {
		return "", ""
	}
	return v.Error.PaymentID, v.Error.PaymentStatus
}

// bankingCircleEntity reads createdResource's Banking Circle answer,
// whose entity is named only in its message.
func bankingCircleEntity(status int, body []byte) (id, state string) {
	const used, creating = " was already used at ", " creating entity "
	if status != http.StatusBadRequest || !bytes.Contains(body, []byte(creating)) {
		return "", ""
	}
	var v struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &v) != nil || !strings.HasPrefix(v.Error.Message, "IdempotencyKey ") {
		return "", ""
	}
	_, after, ok := strings.Cut(v.Error.Message, used)
	if !ok {
		return "", ""
	}
	if _, id, ok = strings.Cut(after, creating); !ok || strings.ContainsAny(strings.TrimSuffix(id, "."), " \t") {
		return "", ""
	}
	return strings.TrimSuffix(id, "."), ""
}

// moovTransfer reads createdResource's Moov answer: the transfer alone,
// no error around it, so a 409 carrying only some of its members (a
// transferID beside an error) is not one.
func moovTransfer(status int, body []byte) (id, state string) {
	if status != http.StatusConflict || !bytes.Contains(body, []byte(`"transferID"`)) {
		return "", ""
	}
	var v struct {
		TransferID string          `json:"transferID"`
		CreatedOn  string          `json:"createdOn"`
		Status     string          `json:"status"`
		Error      json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &v) != nil || v.CreatedOn == "" || v.Status == "" || v.Error != nil {
		return "", ""
	}
	return v.TransferID, v.Status
}

// reusedElsewhere reports whether a 409's body says the key was used
// before by a request other than this one (PayFacto's
// IDEMPOTENCY_KEY_REUSED, Increase's idempotency_key_already_used_error,
// emergepay's "already exists with a conflicting payload", Xendit's
// DUPLICATE_ERROR "duplicate value on idempotency_key, try again with a
// new key", its final word for a key another body used):
// the 422 of servers that answer it with 409. Other 409s say the key's
// request is still running, often in words about the key too ("already
// in progress", "in use"), so the words for a request that differs are
// narrower than reusesKey's, and any word of a request still running
// leaves the 409 read as in flight: read as a conflict, a request still
// running would fail ours while it may yet succeed. "conflicting" must
// be a word before another: GoCardless's links.conflicting_resource_id
// names the resource its key made, which is no other request's.
func reusedElsewhere(body []byte, name string) bool {
	if !namesKey(body, name) {
		return false
	}
	return !saysAny(body, "progress", "in use", "in flight", "processing", "being processed", "outstanding", "concurrent", "not completed", "still") &&
		saysAny(body, "differ", "mismatch", "not match", "conflicting ", "reuse", "re-use", "already used", "already_used", "already been used", "previously used", "duplicate")
}

// versionConflict reports whether a 409's body refuses the version of
// the resource the request carries: commercetools' ConcurrentModification
// error, {"statusCode":409,"message":"Object <id> has a different
// version than expected. Expected: 1 - Actual: 2.","errors":[{"code":
// "ConcurrentModification",…,"currentVersion":2}]} (its SDK's
// ConcurrentModificationError,
// https://commercetools.github.io/commercetools-sdk-java-v2/javadoc/com/commercetools/api/models/error/ConcurrentModificationError.html:
// "resolve the conflict … before retrying"). No key is in flight: the
// same bytes, resent, are refused so forever, and an earlier copy of
// ours that executed moves the version as another writer does (the JVM
// SDK's ConcurrentModificationException shows an update sent "by
// accident again" refused so). A refusal, then, never failed: left for
// a person to a first attempt (a copy a proxy retried may have moved the
// version), asked about and left for a person after an attempt that may
// have executed. Salesforce OCAPI's 409 ConcurrentModificationException fault,
// which its docs say to "simply retry", is no such body: still resent.
func versionConflict(body []byte) bool {
	if !bytes.Contains(body, []byte("ConcurrentModification")) {
		return false
	}
	var v struct {
		Errors []struct {
			Code string `json:"code"`
		} `json:"errors"`
	}
	if json.Unmarshal(body, &v) != nil {
		return false
	}
	for _, e := range v.Errors {
		if e.Code == "ConcurrentModification" {
			return true
		}
	}
	return false
}

// conditionalUpdate reports whether a submit's header as sent makes it
// conditional on the target's current version (If-Match, or
// If-Unmodified-Since): its 412 Precondition Failed (RFC 9110 15.5.13)
// says the version moved since the update was built, as commercetools'
// ConcurrentModification does (versionConflict), and a copy of this
// update that applied (a sidecar's retry of a 503 reset) moves it too:
// Banking Circle's PUT and DELETE carry the resource's concurrency token
// so (docs.bankingcircleconnect.com/guides/concurrency-handling). Not
// If-None-Match: a conditional create's 412 says the resource exists,
// another reading (conditionalCreate). Not a GET or HEAD: a safe
// method's copy moves no version. Nor an If-Match of weak tags only
// (W/"1"): If-Match compares strongly (RFC 9110 13.1.1), so a compliant
// server refuses it whatever the version, and nothing executed; If-
// Unmodified-Since beside it is ignored (RFC 9110 13.2.2).
func conditionalUpdate(method string, h http.Header) bool {
	if method == http.MethodGet || method == http.MethodHead {
		return false
	}
	if tags, ok := h["If-Match"]; ok {
		return slices.ContainsFunc(tags, func(v string) bool {
			// A ',' inside a tag splits it too: a piece of a weak one may
			// then read strong, the reading a version moved keeps.
			return slices.ContainsFunc(strings.Split(v, ","), func(tag string) bool {
				tag = strings.TrimSpace(tag)
				return tag != "" && !strings.HasPrefix(tag, "W/")
			})
		})
	}
	return len(h["If-Unmodified-Since"]) > 0
}

// conditionalCreate reports whether a submit's header as sent makes it
// create-only (If-None-Match: *, RFC 9110 13.1.2): its 412 says the
// target exists, Amazon S3's answer to a conditional write "if the
// object key name does already exist"
// (docs.aws.amazon.com/AmazonS3/latest/userguide/conditional-writes.html).
// What made it may be a copy of this very create that a proxy retried
// after its answer was lost (a mesh's retry of a 503 reset before
// headers), as for a create's 409 "order already exists" (paidRefusal).
// Failed, the caller makes it again under another name: twice.
func conditionalCreate(h http.Header) bool {
	for _, v := range h["If-None-Match"] {
		for _, tag := range strings.Split(v, ",") {
			if strings.TrimSpace(tag) == "*" {
				return true
			}
		}
	}
	return false
}

// objectStateRefusal reports whether a 409's body is Increase's refusal
// of the action for the state of the object it acts on, an RFC 9457
// problem of type invalid_operation_error ("The action you specified
// can't be performed on the object in its current state.", detail
// "There's an insufficient balance in the account.",
// https://increase.com/documentation/errors): no request in flight, and
// not the key's (idempotency_key_already_used_error is its key's). Read
// as in flight, a first attempt so refused was resent until it was left
// pending, and a resend so refused was waited for as a transfer under
// way until the key window closed: it is a refusal, failed to a first
// attempt (a copy of it that executed would be replayed, Increase
// de-duplicating by the key), asked about and left for a person after
// an attempt that may have executed.
func objectStateRefusal(body []byte) bool {
	return memberIs(body, "type", "invalid_operation_error")
}

// badValueRefusal reports whether a 409's body refuses the request's
// values, never a key in flight: Klarna's BAD_VALUE,
// {"error_code":"BAD_VALUE","error_messages":[…],"correlation_id":…},
// Klarna Payments' refusal of a create order whose values no longer match
// what its session or authorization holds ("Not matching fields...") or
// whose authorization already placed an order with another body ("The
// order has been already completed with different request body"),
// https://docs.klarna.com/resources/developer-tools/error-handling/error-codes-and-messages-for-klarna-payments/;
// or Affirm's refusal of a capture's amount, its error object's code
// capture-greater-instrument, capture-unequal-instrument or
// partial-capture-instrument (docs.affirm.com/developers/docs/development-error-codes),
// answered 409 as its key still being processed is
// (docs.affirm.com/developers/reference/errors). The same bytes are
// refused so forever: read as in flight, they were resent until the key
// window closed. A refusal, as objectStateRefusal's: failed to a first
// attempt (a copy of these bytes that executed would be answered its
// result under the key), asked about and left for a person after an
// attempt that may have executed.
func badValueRefusal(body []byte) bool {
	return memberIs(body, "error_code", "BAD_VALUE") || memberIs(body, "code", "capture-greater-instrument") ||
		memberIs(body, "code", "capture-unequal-instrument") || memberIs(body, "code", "partial-capture-instrument")
}

// memberIs reports whether JSON body is an object whose member name is
// the string value.
func memberIs(body []byte, name, value string) bool {
	if !bytes.Contains(body, []byte(value)) {
		return false
	}
	var v map[string]json.RawMessage
	if json.Unmarshal(body, &v) != nil {
		return false
	}
	var got string
	return json.Unmarshal(v[name], &got) == nil && got == value
}

// refusalInFlight reports whether a refusal other than a 409 (a
// Conflict, or a Rejected 400) says the key's request is still running,
// or has run: Adyen's 422 errorCode 704, "request already processed or
// in progress", and PayPal's 422 PREVIOUS_REQUEST_IN_PROGRESS, "a
// previous request on this resource is currently in progress", which
// name no key, or a 400 about the key "currently being processed", or
// one whose AWS error code is in inFlightCodes (DynamoDB's
// TransactionInProgressException, whose key is a "request token"), or
// one saying the order or payment is in progress (saysSubjectRunning),
// whoever's request it is: "a refund request is in progress" too, which
// saysKeyRunning does not take for the key's. name is as for namesKey.
func refusalInFlight(v Verdict, status int, h http.Header, body []byte, name string) bool {
	if v != Conflict && (v != Rejected || status != http.StatusBadRequest) {
		return false
	}
	if status == http.StatusBadRequest && awsErrorCode(h, body, inFlightCodes) {
		return true
	}
	return saysKeyRunning(body, name) || saysSubjectRunning(body)
}

// saysSubjectRunning reports whether a clause of a refusal is about the
// order, payment or other subject a request makes, and says it is in
// progress ("Payment with this order id is in progress", a code's
// PAYMENT_IN_PROGRESS) or locked by a request that runs (PayU India's
// refusal of a refund, error_code 120, "Transaction lock could not be
// obtained.", while a refund request on the payment holds it). A server
// that checks its order id or lock before, or without, its idempotency
// store answers so to a copy of this very request that runs (a mesh's
// retry of a first attempt, net/http's resend on a dead connection, an
// earlier attempt whose answer was lost) as well as to another's, and
// says "another payment" of a copy too, which is another request to it.
// It may charge: never "failed". The subject must open the clause, after
// a determiner at most: "Account verification is in progress" is about
// something else.
func saysSubjectRunning(body []byte) bool {
	text := bytes.ToLower(body)
	clauses := bytes.FieldsFunc(text, func(r rune) bool { return strings.ContainsRune(`".!?;:{}[]<>`, r) })
	for _, c := range clauses {
		words := strings.FieldsFunc(string(c), func(r rune) bool { return r >= utf8.RuneSelf || !alnum(byte(r)) })
		// "Your previous payment": a determiner and a word placing the
		// subject earlier, at most, before it.
		for n := 0; n < 2 && len(words) > 0 && (slices.Contains(determiners[:], words[0]) || slices.Contains(earlierWords[:], words[0])); n++ {
			words = words[1:]
		}
		if len(words) < 3 || !slices.ContainsFunc(subjects[:], func(s string) bool { return s != "token" && (words[0] == s || words[0] == s+"s") }) {
			continue
		}
		rest := []byte(strings.Join(words[1:], " "))
		if containsAny(rest, "in progress", "in process", "in flight", "being processed", "still processing", "currently processing", "lock could not be obtained") {
			return true
		}
	}
	return false
}

// determiners may stand before saysSubjectRunning's subject.
var determiners = [...]string{"a", "an", "the", "this", "your", "another", "other"}

// earlierWords place a subject before this request ("Your previous
// payment is still being processed"): one that runs may be a copy of it.
var earlierWords = [...]string{"previous", "earlier", "last", "prior", "existing", "pending", "current", "same"}

// saysKeyRunning reports whether an answer's words say the key's request
// is still running: about the key (namesKey) or an earlier request, and
// "in progress" or the like; or that this very request is, as Shopify's
// IDEMPOTENCY_CONCURRENT_REQUEST says it in a refundCreate userError,
// whose plain UserError has no code to say "idempotency": "This request
// is currently in progress", or as Worldpay's WPG says it in the XML
// error of its 200 reply, error code 9 "Request in progress", a whole
// message (bareInProgress), or as Toss Payments' code
// ALREADY_PROCESSING_REQUEST says it beside words in Korean only, to a
// confirmation of a payment whose confirmation still runs
// (docs.tosspayments.com/reference/error-codes), the in-progress sibling
// of its ALREADY_PROCESSED_PAYMENT. Only "this request", or "request"
// alone, as the subject: "a refund request is in progress" is another
// request's. name is as for namesKey.
func saysKeyRunning(body []byte, name string) bool {
	if saysAny(body, "this request is currently in progress", "this request is still in progress", "this request is in progress",
		"already_processing_request") || bareInProgress(body) {
		return true
	}
	if !namesKey(body, name) && !saysAny(body, "request already", "previous request") {
		return false
	}
	return saysAny(body, "in progress", "in flight", "being processed", "still processing", "currently processing")
}

// bareInProgress reports whether a message of body is "Request in
// progress" and nothing more, in any case, the quotes of a JSON string,
// an XML element's or CDATA section's bounds around it, or a period
// after it: WPG's idempotency error 9 (developer.worldpay.com/docs/wpg/
// troubleshoot/idempotencyerrors, "A request with the same Idempotency
// Key is currently being processed"). No other request is named, so it
// is the key's.
func bareInProgress(body []byte) bool {
	const words = "request in progress"
	text := bytes.ToLower(body)
	for i := 0; ; {
		at := bytes.Index(text[i:], []byte(words))
		if at < 0 {
			return false
		}
		start, end := i+at, i+at+len(words)
		i = end
		before := bytes.TrimRight(text[:start], " \t\r\n")
		after := bytes.TrimLeft(bytes.TrimPrefix(text[end:], []byte(".")), " \t\r\n")
		if len(before) > 0 && len(after) > 0 && bytes.IndexByte([]byte(`"'>[`), before[len(before)-1]) >= 0 &&
			bytes.IndexByte([]byte(`"'<]`), after[0]) >= 0 {
			return true
		}
	}
}

// graphQLRequestError reports whether body is a GraphQL request error:
// a non-empty top-level "errors" with no "data", or a null one (the
// GraphQL spec's "Data": a request that failed before it ran, or whose
// error reached the root, has none: Hasura's "database query error",
// hasura/graphql-engine#6489). It looked for nothing, whatever a Decoder
// that reads its missing list as empty makes of it.
func graphQLRequestError(body []byte) bool {
	var v struct {
		Errors []json.RawMessage `json:"errors"`
		Data   json.RawMessage   `json:"data"`
	}
	if json.Unmarshal(trimBOM(body), &v) != nil || len(v.Errors) == 0 {
		return false
	}
	return len(v.Data) == 0 || string(v.Data) == "null"
}

// graphQLInternalError reports whether body is a GraphQL answer with a
// top-level error that says the server failed, not the request: an
// extensions.code of INTERNAL_SERVER_ERROR, the code Shopify's Admin API
// answers 200 OK in place of a 500 (community.shopify.com, "760 internal
// errors when calling Shopify GraphQL API") and Apollo Server's for an
// unspecified error; or Braintree's extensions.errorClass INTERNAL or
// SERVICE_AVAILABILITY, which its SDKs raise as the ServerError of a 500
// and the DownForMaintenanceError Braintree documents as "raised when a
// request times out" (braintree_python's graphql_client.py). Braintree's
// other classes (VALIDATION, NOT_FOUND, AUTHORIZATION, RESOURCE_LIMIT,
// ...) refuse the request before it runs.
func graphQLInternalError(body []byte) bool {
	var v struct {
		Errors []struct {
			Extensions struct {
				Code       string `json:"code"`
				ErrorClass string `json:"errorClass"`
			} `json:"extensions"`
		} `json:"errors"`
	}
	if json.Unmarshal(trimBOM(body), &v) != nil {
		return false
	}
	for _, e := range v.Errors {
		switch {
		case e.Extensions.Code == "INTERNAL_SERVER_ERROR",
			e.Extensions.ErrorClass == "INTERNAL", e.Extensions.ErrorClass == "SERVICE_AVAILABILITY":
			return true
		}
	}
	return false
}

// keyIgnored reports whether an answer's headers say the server did not
// de-duplicate the request by its key: Solidgate's Idempotency-Status:
// ignored, for an endpoint without idempotency support (the X- name as
// Integrated Finance spells its Idempotency-Status).
func keyIgnored(h http.Header) bool {
	return markerIs(h, statusMarkers[0], "ignored") || markerIs(h, statusMarkers[1], "ignored")
}

// throttleCodes are the error codes of AWS's SDKs' throttling errors
// (aws-sdk-go-v2's retry.DefaultThrottleErrorCodes) that its JSON and
// Query protocols answer with 400, not 429. Not LimitExceededException
// and the like: they may name a limit a resend never gets under.
var throttleCodes = map[string]bool{
	"Throttling": true, "ThrottlingException": true, "ThrottledException": true, "RequestThrottledException": true,
	"TooManyRequestsException": true, "RequestThrottled": true, "RequestLimitExceeded": true, "SlowDown": true,
	"EC2ThrottledException": true,
}

// inFlightCodes are the AWS error codes, answered with 400, that say the
// request's idempotency token belongs to a request still running:
// DynamoDB's TransactionInProgressException, which AWS has clients retry
// with backoff until the transaction completes.
var inFlightCodes = map[string]bool{"TransactionInProgressException": true}

// throttledAnswer reports whether a 400 is a throttled request's: its
// AWS error code is one of throttleCodes (awsErrorCode).
func throttledAnswer(h http.Header, body []byte) bool {
	return awsErrorCode(h, body, throttleCodes)
}

// awsErrorCode reports whether an answer's AWS error code is one of
// codes: its X-Amzn-ErrorType header or a word of its body, as spelled
// (words are runs of ASCII letters and digits, so that
// "com.amazon.coral.availability#ThrottlingException" and
// "<Code>Throttling</Code>" both name one, and a message about a
// "throttling_rate" or "Throttling rate" does not).
func awsErrorCode(h http.Header, body []byte, codes map[string]bool) bool {
	if typ, _, _ := strings.Cut(headerValue(h, "X-Amzn-Errortype"), ":"); codes[strings.TrimSpace(typ)] {
		return true
	}
	for i := 0; i < len(body); {
		j := i
		for j < len(body) && alnum(body[j]) {
			j++
		}
		// A code ends a JSON string or an XML element; an exception's
		// name is one wherever it stands. "Throttling" opening a sentence
		// is not.
		if j > i && codes[string(body[i:j])] &&
			(bytes.HasSuffix(body[i:j], []byte("Exception")) || j < len(body) && (body[j] == '"' || body[j] == '<')) {
			return true
		}
		i = j + 1
	}
	return false
}

// joiner reports whether c, before a word, makes it the tail of a longer
// name: customer_id, customer-id, customer.id, /customer/data/id.
func joiner(c byte) bool { return c == '_' || c == '-' || c == '.' || c == '/' }

// identMember reports whether the word ending at end in a JSON body is
// the name of a member whose value is an identifier, a string without a
// space: an error object's own "id" (JSON:API's), a server's trace
// "request_id". A member whose value is words, or a list of them, is a
// field's errors ({"request_id": ["has already been taken"]}, as Rails
// writes them), which do speak of it.
func identMember(body []byte, end int) bool {
	if end >= len(body) || body[end] != '"' {
		return false
	}
	rest := bytes.TrimLeft(body[end+1:], " \t\r\n")
	if len(rest) == 0 || rest[0] != ':' {
		return false
	}
	rest = bytes.TrimLeft(rest[1:], " \t\r\n")
	if len(rest) == 0 || rest[0] != '"' {
		return false
	}
	v, _, closed := bytes.Cut(rest[1:], []byte(`"`))
	return closed && !bytes.ContainsAny(v, " \t")
}

func alnum(c byte) bool { return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' }

// fromCache returns what in an answer's headers says that a cache served
// it from its store instead of passing this request on ("Age: 12",
// "X-Cache: Hit from cloudfront"), or "" when nothing does:
//   - Age (RFC 9111 5.1) above 0, which a cache adds to what it serves
//     from its store; Age: 0 is what one in front adds to an answer it
//     passed through.
//   - RFC 9211's Cache-Status with a "hit" on any cache's entry.
//   - the status headers of caches that send no Age, nginx's above all:
//     its $upstream_cache_status as operators add it (X-Cache-Status,
//     X-Proxy-Cache), Cloudflare's CF-Cache-Status, and X-Cache
//     (CloudFront, Fastly, Akamai, Squid), when an entry's first word is
//     a hit (HIT, Hit, RefreshHit, TCP_MEM_HIT, HIT-STALE…) or STALE,
//     UPDATING or REVALIDATED: the stored body, whatever the origin was
//     asked.
func fromCache(h http.Header) string {
	// Most answers have no Age: ParseUint's error for "" would be an
	// allocation per answer.
	if v := strings.TrimSpace(headerValue(h, "Age")); v != "" {
		if age, err := strconv.ParseUint(v, 10, 64); err == nil && age > 0 || errors.Is(err, strconv.ErrRange) {
			return "Age: " + truncate(v, 20)
		}
	}
	for _, v := range h["Cache-Status"] {
		if cacheStatusHit(v) {
			return "Cache-Status: " + truncate(v, 64)
		}
	}
	for _, name := range cacheMarkers[:] {
		for _, v := range h[name] {
			for entry := range strings.SplitSeq(v, ",") {
				word, _, _ := strings.Cut(strings.TrimSpace(entry), " ")
				if cacheHitWord(strings.ToUpper(word)) {
					return name + ": " + truncate(v, 64)
				}
			}
		}
	}
	return ""
}

// namesKeyValue reports whether an answer names key: its key header
// (header; "" when the key goes in the body) echoes it, bare or as an
// sf-string, or its body holds it as a JSON string. cacheNamesKey asks
// it of a cache's answer to a result query, whose body it passes only
// when the key goes in the body: a key in a header is a value other
// resources may carry (an order number), so the body must name it as a
// 409 replay's does (namesRequest).
func namesKeyValue(h http.Header, body []byte, header, key string) bool {
	if header != "" {
		for _, v := range h[header] {
			if v = strings.TrimSpace(v); v == key || v == sfString(key) {
				return true
			}
		}
	}
	if bytes.Contains(body, []byte(`"`+key+`"`)) {
		return true
	}
	quoted, err := json.Marshal(key)
	return err == nil && bytes.Contains(body, quoted)
}

// pathNamesKey reports whether the path of queryURL, a result endpoint's
// URL, has key as one of its segments (WithResultEndpoint path-escapes it
// there) and its query string does not carry key. Every cache keys on the
// path, so what one serves for that URL is the key's own result, if
// stale; only a key in the query string can be left out of a cache's key
// (namesKeyValue). A key in both may be a query-string key that happens to
// read as a segment too ("/v1/results?key=results"): not trusted.
func pathNamesKey(queryURL, key string) bool {
	u, err := url.Parse(queryURL)
	if err != nil || strings.Contains(u.RawQuery, url.QueryEscape(key)) || strings.Contains(u.RawQuery, url.PathEscape(key)) {
		return false
	}
	for seg := range strings.SplitSeq(u.EscapedPath(), "/") {
		if s, err := url.PathUnescape(seg); err == nil && s == key {
			return true
		}
	}
	return false
}

// cacheHitWord reports whether a cache status word (upper case) says the
// answer came from the cache's store.
func cacheHitWord(w string) bool {
	switch w {
	case "STALE", "UPDATING", "REVALIDATED":
		return true
	}
	if strings.Contains(w, "PASS") {
		// Varnish's hit-for-pass (HIT-FOR-PASS, HITPASS): a stored
		// marker that sends the request on to the origin, whose answer
		// this is.
		return false
	}
	return strings.HasPrefix(w, "HIT") || strings.HasSuffix(w, "HIT")
}

// cacheStatusHit reports whether an RFC 9211 Cache-Status value, a list
// of caches each with parameters ("ExampleCache; hit; ttl=30, CDN;
// fwd=uri-miss"), has a cache whose parameters hold hit (bare, or the
// boolean ?1). Commas and semicolons inside quoted strings (a cache's
// name, a key parameter) separate nothing.
func cacheStatusHit(v string) bool {
	first := true // the item before a member's first ';' is the cache's name
	start, quoted := 0, false
	for i := 0; i <= len(v); i++ {
		if i < len(v) {
			switch c := v[i]; {
			case quoted && c == '\\':
				i++
				continue
			case c == '"':
				quoted = !quoted
				continue
			case quoted || c != ',' && c != ';':
				continue
			}
		}
		if !first {
			name, val, _ := strings.Cut(strings.TrimSpace(v[start:i]), "=")
			if strings.EqualFold(strings.TrimSpace(name), "hit") && (val == "" || strings.TrimSpace(val) == "?1") {
				return true
			}
		}
		first = i < len(v) && v[i] == ','
		start = i + 1
	}
	return false
}

// asciiFold reports whether ASCII b equals lower-case word, ignoring case.
func asciiFold(b []byte, word string) bool {
	for i := range len(word) {
		if lower(b[i]) != word[i] {
			return false
		}
	}
	return true
}

// windowState is whether the key window still allows a resend.
type windowState int

const (
	windowOpen      windowState = iota
	windowExpired               // the server may have forgotten the key
	windowUntrusted             // a journaled time is in the future
)

// clockSlack is how far in the future a journaled time may lie before the
// clock is taken to have stepped back: more than a slewing clock's drift,
// less than any key window's margin.
const clockSlack = 2 * time.Second

// beyondSlack reports whether t lies further ahead of now than bound,
// with clockSlack to spare: set while the clock ran fast. It subtracts
// rather than adds: WithReconcile and WithRetryAfterCap take any bound,
// math.MaxInt64 too, where bound+clockSlack overflowed to a negative
// and every rest, journaled wait and schedule was taken for one set so.
func beyondSlack(t, now time.Time, bound time.Duration) bool {
	return t.After(now) && t.Sub(now)-clockSlack > bound
}

// resendWindow is how long after the first send that may have executed a
// key is still resent: the server's window less KeyWindowMargin, or less a
// tenth of a short window.
func resendWindow(window time.Duration) time.Duration {
	return window - min(KeyWindowMargin, window/10)
}

// keyWindow judges the key window of rec at now. Only a key that may have
// executed can be forgotten to harm: resending one that never executed
// cannot duplicate anything. A record the window once could not judge
// (flagged ReviewClockStepped) stays untrusted: its FirstSent is no
// measure of the key's age, even once the clock has caught up with it.
func keyWindow(rec *journal.Record, p past, now time.Time, window time.Duration) windowState {
	if !p.maybeExecuted || rec.FirstSent.IsZero() {
		return windowOpen
	}
	if rec.Review == ReviewClockStepped || inFuture(rec, now) {
		return windowUntrusted
	}
	if now.Sub(rec.FirstSent) >= window {
		return windowExpired
	}
	return windowOpen
}

// resultLagging reports whether, at now, the result endpoint may not yet
// show what rec's last send that may have executed placed: it ended less
// than lag ago, or at a time now finds in the future (a clock stepped
// back must never make the lag look over early). One never answered
// counts from its start plus timeout, the latest it could have reached
// the server. One an earlier process journaled (begun before born, when
// known) counts from born at the earliest: how wrong that process's
// clock read is not known, and one slow then and put right since (a
// VM's clock stepped forward at boot) makes the send look older than it
// is, the lag over while the read path still lags. Each send's end is
// put later by the wall clock's steps forward since it (steps; the zero
// wallView: none seen), which make this process's own sends look older
// than they are too.
func resultLagging(rec *journal.Record, now, born time.Time, steps wallView, lag, timeout time.Duration) bool {
	if lag <= 0 {
		return false
	}
	var last time.Time
	for _, a := range rec.Attempts {
		if !maybeExecuted(a) {
			continue
		}
		end := a.Start.Add(max(a.Duration, 0))
		if !a.Done {
			end = a.Start.Add(timeout)
		}
		if a.Start.Before(born) {
			end = maxTime(end, born)
		}
		end = end.Add(steps.stepSince(maxTime(a.Start, born)))
		if end.After(last) {
			last = end
		}
	}
	return !last.IsZero() && now.Sub(last) < lag
}

// inFuture reports whether any time the journal holds for rec's sends lies
// past now by more than clockSlack.
func inFuture(rec *journal.Record, now time.Time) bool {
	limit := now.Add(clockSlack)
	if rec.FirstSent.After(limit) || rec.Created.After(limit) {
		return true
	}
	for _, a := range rec.Attempts {
		if a.Start.After(limit) {
			return true
		}
	}
	return false
}
