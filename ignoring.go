package idem

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/idemkit/idem/journal"
)

// maxIgnoringEndpoints bounds the endpoints a Client learns ignore the
// key, besides those the journal keeps (as many at most,
// journal.MaxKeyIgnoringEndpoints): paths may hold ids, and what is past
// the bound is only as protected as an operation's own answers make it.
const maxIgnoringEndpoints = journal.MaxKeyIgnoringEndpoints

// keyIgnoring is the endpoints (method, URL without its query) whose
// answers said the server does not de-duplicate by the key there
// (Idempotency-Status: ignored). Whether an endpoint supports idempotency
// is the endpoint's, not the request's (Solidgate: "Idempotency support
// varies by endpoint"): another operation to it whose answer is lost may
// have executed, and a resend would execute again, though no answer of
// its own said so. Journaled as it is learnt when the Store keeps them
// (KeyIgnoringStore), and read back with the open operations flagged for
// it (ignoringLearnt): once the last of those settled, nothing else would
// tell the next process. The zero value is empty and ready to use.
type keyIgnoring struct {
	any atomic.Bool // an endpoint is known: the submit's path reads only this while none is
	mu  sync.Mutex
	// set: each endpoint known, true if learnt by this process (counted
	// in learntHere, which forget gives back).
	set map[string]bool
	// learntHere, under mu: those of set learnt by this process, not
	// read from the journal (keptIgnoring).
	learntHere int
	// learnt: the journal's endpoints and open operations flagged for
	// it have been read (Client.ignoringLearnt); walking, under mu, is
	// closed when the walk under way ends (nil: none is).
	learnt  atomic.Bool
	walking chan struct{}
	// firstTried: a first send has walked, or found a walk under way
	// (ignoringLearntFirst); later first sends do not walk.
	firstTried atomic.Bool
	// save journals an endpoint learnt here (nil: the Store keeps
	// none); set by New, before any call. saving, under mu, counts
	// those under way (saveIgnoring), which Close waits for (waitSaves);
	// saved, under mu, is closed when saving drops to 0 (nil: nobody
	// waits); waiting, under mu, counts the waitSaves waiting on it (a
	// payment whose answer taught the endpoint, Close, ForgetKeyIgnoring).
	save    func(endpoint string)
	saving  int
	saved   chan struct{}
	waiting int
	// unsaved, under mu: endpoints learnt here whose last save failed
	// (saveIgnoring), set before that save stops counting as under way.
	// Known in memory only, they are saved again (saveUnsaved) by the
	// submit whose answer taught one and by Close: else an endpoint whose
	// one save met a full disk for a moment was never journaled, and the
	// next process resent there another payment whose answer was lost.
	unsaved map[string]struct{}
	// unkeptLogged: ErrKeyIgnoringUnkept has been logged.
	unkeptLogged atomic.Bool
	// fullLogged: journal.ErrKeyIgnoringFull has been logged.
	fullLogged atomic.Bool
}

// saveIgnoringTimeout bounds the journaling of an endpoint learnt to
// ignore the key (saveIgnoring), and Close's wait for it: a Store that
// stalls must not hold the goroutine, nor Close, for ever.
const saveIgnoringTimeout = 10 * time.Second

// endpoint names rec's endpoint as keyIgnoring keys it. Without the URL's
// userinfo: the name is journaled (KeyIgnoringStore) and logged, kept
// until an operator drops it, and a record journaled before URLs with
// credentials were refused may still carry one.
func endpoint(rec *journal.Record) string {
	u := endpointKeyOf(rec).url
	if scheme, rest, ok := strings.Cut(u, "://"); ok {
		host, path, _ := strings.Cut(rest, "/")
		if at := strings.LastIndexByte(host, '@'); at >= 0 {
			u = scheme + "://" + host[at+1:]
			if len(host) < len(rest) {
				u += "/" + path
			}
		}
	}
	return rec.Method + " " + u
}

// has reports whether rec's endpoint is known to ignore the key.
func (k *keyIgnoring) has(rec *journal.Record) bool {
	if !k.any.Load() {
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	_, ok := k.set[endpoint(rec)]
	return ok
}

// add remembers that rec's endpoint ignores the key, and journals it
// (save) if it is new to this process. After the commit that flags rec,
// or before it: until the endpoint is journaled, the flagged operation is
// what tells the next process, and a failed save is made again by the
// process that reads the flag (relearn).
func (k *keyIgnoring) add(rec *journal.Record) {
	if e := endpoint(rec); k.insert(e, false) && k.save != nil {
		k.save(e)
	}
}

// insert remembers endpoint e, reporting whether it is new (false: known,
// or past maxIgnoringEndpoints learnt here). kept: read from the journal,
// which bounds them itself; they do not count against what this process
// learns, or a journal holding as many (paths with ids, one per payment)
// would leave no room for an endpoint learnt from an answer.
func (k *keyIgnoring) insert(e string, kept bool) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.set[e]; ok || !kept && k.learntHere >= maxIgnoringEndpoints {
		return false
	}
	if k.set == nil {
		k.set = make(map[string]bool)
	}
	k.set[e] = !kept
	if !kept {
		k.learntHere++
		if k.save != nil {
			// Counted as under way with the endpoint's insertion, not
			// when saveIgnoring starts: a drive that learns the endpoint
			// in between finds it known, starts no save, and must still
			// find this one to wait for (submit's waitSaves).
			k.saving++
		}
	}
	k.any.Store(true)
	return true
}

// relearn remembers rec's endpoint if rec was flagged for ignoring the key
// (ReviewKeyIgnored): what the process that flagged it knew died with it,
// and another operation there whose answer was lost must not be resent.
func (k *keyIgnoring) relearn(rec *journal.Record) {
	if rec.Review == ReviewKeyIgnored {
		k.add(rec)
	}
}

// ignoringLearnt reads, once per Client, the endpoints the journal keeps
// as ignoring the key (KeyIgnoringStore) and those its open operations
// flagged for it (relearn), before a resend
// of something that may have executed is judged: what an earlier process
// learnt died with it, and the caller retrying an operation whose answer
// was lost (with the same key, as told) comes at once after a restart,
// before Resume, or while Run's first pass has yet to read them. Resent
// then, a payment to an endpoint that charges every request was charged
// twice. So before the process's first send (submit): a new payment there
// sent as to one that de-duplicates lets net/http resend it on its own on
// a dead reused connection. And before a confirmation settles an
// operation two of whose sends may have executed
// (markIgnoredBeforeConfirm). Resume's and Run's reading of them counts.
// A failed read is tried again by the next resend or confirmation; a
// send meanwhile goes out once. The walk misses an operation moved
// ahead of where it stands (Store.ForEachOpen): whatever in this process
// moves a flagged one learns from it first (a drive as it starts, Run's
// reschedule; Run's claims and Resume read every one they visit).
//
// One walk at a time; the resends behind it wait for it, each for as long
// as its own ctx lets it: a walk over a big backlog (a pgjournal after an
// outage) must not hold callers whose deadline has passed.
func (c *Client) ignoringLearnt(ctx context.Context) error {
	k := &c.ignoring
	for !k.learnt.Load() {
		k.mu.Lock()
		if busy := k.walking; busy != nil {
			k.mu.Unlock()
			select {
			case <-busy:
				continue // learnt, or failed: this one walks again
			case <-ctx.Done():
				return context.Cause(ctx)
			}
		}
		busy := make(chan struct{})
		k.walking = busy
		k.mu.Unlock()
		// Both read, whichever fails: each teaches what it can.
		err := c.keptIgnoring(ctx)
		if werr := c.store.ForEachOpen(ctx, func(r *journal.Record) error {
			k.relearn(r)
			return nil
		}); err == nil {
			err = werr
		}
		if err == nil {
			k.learnt.Store(true)
		}
		k.mu.Lock()
		k.walking = nil
		k.mu.Unlock()
		close(busy)
		if err != nil {
			return err
		}
	}
	return nil
}

// knowsIgnoring reports whether rec's endpoint is known to ignore the
// key, before a resend of something that may have executed
// (resendBlock), or a confirmation of something two sends of which may
// have (markIgnoredBeforeConfirm): what the journal says first
// (ignoringLearnt), and, if not known, its journaled endpoints read again
// (keptIgnoring). Another Client on the journal may have journaled it
// since this one read them (a replica; the Client a rollout's Shutdown
// drains, whose calls in flight go on learning): resent, what may have
// executed there executes again; settled unflagged, two charges go
// unseen.
func (c *Client) knowsIgnoring(ctx context.Context, rec *journal.Record) (bool, error) {
	if err := c.ignoringLearnt(ctx); err != nil {
		return false, err
	}
	if c.ignoring.has(rec) {
		return true, nil
	}
	if err := c.keptIgnoring(ctx); err != nil {
		return false, err
	}
	return c.ignoring.has(rec), nil
}

// keptIgnoring remembers the endpoints the journal keeps as ignoring the
// key, journaled by an earlier process or by another Client on the
// journal (keyIgnoring.save): read, not saved again. A Store with no
// place for them yet (ErrKeyIgnoringUnkept: pgjournal before Migrate)
// keeps none: logged, not an error, or every resend would fail until the
// schema is migrated.
func (c *Client) keptIgnoring(ctx context.Context) error {
	ks, ok := c.store.(KeyIgnoringStore)
	if !ok {
		return nil
	}
	kept, err := ks.KeyIgnoringEndpoints(ctx)
	for _, e := range kept {
		c.ignoring.insert(e, true)
	}
	if errors.Is(err, ErrKeyIgnoringUnkept) {
		c.logUnkept(ctx, err)
		return nil
	}
	return err
}

// logUnkept logs, once per Client, that the journal keeps no endpoints
// that ignore the key yet.
func (c *Client) logUnkept(ctx context.Context, err error) {
	if c.ignoring.unkeptLogged.Swap(true) {
		return
	}
	c.log.LogAttrs(ctx, slog.LevelWarn,
		"idem: the journal keeps no endpoints that ignore the idempotency key (run the journal's Migrate); they are learnt from the open operations flagged for them meanwhile",
		slog.Any("err", err))
}

// saveIgnoring journals endpoint e as ignoring the key, in a goroutine of
// its own with a context no caller's cancellation ends, bounded by
// saveIgnoringTimeout: a drive whose answer taught it and flags its
// operation for it goes on to record that answer at once, whatever the
// Store does meanwhile (a stalled database, a custom Store that hangs);
// one whose answer settles unflagged (a 201 marked ignored) waits for it
// first, up to as long (submit). A failure is logged: the operation
// flagged for it still tells the next process, which saves it then; one
// that settled without a flag tells nobody, as before the endpoints were
// journaled.
func (c *Client) saveIgnoring(ks KeyIgnoringStore, e string) {
	k := &c.ignoring // saving counts this save already (insert)
	go func() {
		failed := false
		defer func() {
			k.mu.Lock()
			defer k.mu.Unlock()
			// Before the save stops counting: a waitSaves it ends reads
			// whether it failed.
			k.markUnsaved(e, failed)
			k.saveDone()
		}()
		ctx, cancel := context.WithTimeout(context.Background(), saveIgnoringTimeout)
		defer cancel()
		err := ks.AddKeyIgnoring(ctx, e)
		switch {
		case err == nil:
		case errors.Is(err, ErrKeyIgnoringUnkept):
			// Not journaled either: the submit whose answer taught it
			// flags the endpoint's other open operations (keepLearnt).
			failed = true
			c.logUnkept(ctx, err)
		case errors.Is(err, journal.ErrKeyIgnoringFull):
			failed = true // saved again by Close, once room may be made
			c.logFull(ctx, e, err)
		default:
			failed = true
			c.log.LogAttrs(ctx, slog.LevelWarn,
				"idem: could not journal an endpoint that ignores the idempotency key; its flagged operations still tell the next process",
				slog.String("endpoint", e), slog.Any("err", err))
		}
	}()
}

// waitSaves waits for the endpoints being journaled (saveIgnoring), up to
// saveIgnoringTimeout or until ctx ends: ctx's error then, or
// errSaveUnderWay when a Store held a save past its own bound. nil when
// none is under way any more.
func (c *Client) waitSaves(ctx context.Context) error {
	k := &c.ignoring
	k.mu.Lock()
	if k.saving == 0 {
		k.mu.Unlock()
		return nil
	}
	if k.saved == nil {
		k.saved = make(chan struct{})
	}
	done := k.saved
	k.waiting++
	k.mu.Unlock()
	defer func() {
		k.mu.Lock()
		k.waiting--
		k.mu.Unlock()
	}()
	t := time.NewTimer(saveIgnoringTimeout)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	case <-t.C:
		return errSaveUnderWay
	}
}

// keepFlagged journals the endpoint rec, flagged ReviewKeyIgnored, was
// flagged for, before what settles rec (Confirm, Resolve) clears the
// flag: it may be all that tells a restarted process the endpoint
// ignores the key (its save lost to a kill, or failed: a full disk, the
// journal's endpoints at their bound), and cleared first, Resume resent
// another payment there whose answer was lost, a second charge. It learns
// the endpoint from the flag, waits for its save under way (waitSaves:
// its error, saving true), then journals it itself (keepEndpoint's
// error): that save, or this process's earlier one, may have failed
// rather than hung, and a process that knows the endpoint does not save
// it again. On a Store that keeps no endpoints (not a KeyIgnoringStore,
// or ErrKeyIgnoringUnkept) the flag is the endpoint's only trace
// (flagUnkept).
func (c *Client) keepFlagged(ctx context.Context, rec *journal.Record) (saving bool, err error) {
	c.ignoring.relearn(rec)
	if err := c.waitSaves(ctx); err != nil {
		return true, err
	}
	kept, err := c.keepEndpoint(ctx, endpoint(rec))
	return false, flagUnkept(ctx, c.store, rec, kept, err)
}

// flagUnkept follows the journaling of the endpoint rec is flagged
// ReviewKeyIgnored for, which ended in err, kept saying whether the
// Store kept it. One that keeps none (not a KeyIgnoringStore, or
// ErrKeyIgnoringUnkept) has only rec's flag to tell the next process of
// the endpoint: cleared, Resume resent another payment there whose
// answer was lost, a second charge. The open operations to it a send of
// which may have executed are flagged first (flagSentTo), their flags
// telling it then.
func flagUnkept(ctx context.Context, s Store, rec *journal.Record, kept bool, err error) error {
	if err != nil || kept {
		return err
	}
	_, err = flagSentTo(ctx, s, endpoint(rec), true, rec)
	return err
}

// keepBeforeResolve is keepFlagged before Resolve settles scope and key,
// if it is open and flagged ReviewKeyIgnored (keptForResolve). It
// returns the record read (nil if the journal has none).
func (c *Client) keepBeforeResolve(ctx context.Context, scope, key string) (*journal.Record, error) {
	prior, err := c.store.Get(ctx, scope, key)
	switch {
	case errors.Is(err, journal.ErrNotFound):
		return nil, nil // the resolution says so
	case err != nil:
		return nil, errorf("idem: Resolve (scope %q, key %q): nothing was written: %w", scope, key, withCause(ctx, err))
	case !journal.FlaggedKeyIgnored(prior):
		return prior, nil
	}
	saving, err := c.keepFlagged(ctx, prior)
	if saving {
		return nil, errorf("idem: Resolve (scope %q, key %q): %s; the endpoint is still being journaled, so nothing was written: resolve it again: %w", scope, key, flaggedForIgnoring, err)
	}
	if err := keptForResolve(ctx, c.store, prior, err); err != nil {
		return nil, errorf("idem: Resolve (scope %q, key %q): %w", scope, key, withCause(ctx, err))
	}
	return prior, nil
}

// unlessFlaggedSinceRead runs read, then write, made
// UnlessFlaggedKeyIgnored (unless) when what read saw (nil: nothing) is
// not flagged ReviewKeyIgnored; twice at most. A flag set between the
// read and the write (by another replica's drive, on a shared journal)
// makes the Store write nothing (journal.ErrFlaggedKeyIgnored), and the
// second read finds it, so that read (Confirm's, Resolve's) journals its
// endpoint before the write clears the flag: cleared unjournaled, the
// flag may have been all that told the next process the endpoint ignores
// the key, and it resent there another payment whose answer was lost, a
// second charge. It returns read's error, nothing written; write's is
// write's to keep.
func unlessFlaggedSinceRead(read func() (seen *journal.Record, err error), write func(unless bool) error) error {
	for range 2 {
		seen, err := read()
		if err != nil {
			return err
		}
		if err := write(seen == nil || !journal.FlaggedKeyIgnored(seen)); !errors.Is(err, journal.ErrFlaggedKeyIgnored) {
			return nil
		}
	}
	return nil
}

// KeepKeyIgnoringBeforeResolve is what a tool on the journal (idem
// resolve on a stopped journal file or on a pgjournal) calls before it
// resolves rec, read from s, by hand (Store.Resolve), as Client.Resolve
// does: if rec is open and flagged ReviewKeyIgnored, the flag may be all
// that tells a process that its endpoint ignores the key (the endpoint's
// save failed: a full disk, the journal's endpoints at their bound), and
// cleared first, the next process resends there another payment whose
// answer was lost, under the same key: a second charge. It journals the
// endpoint in s (KeyIgnoringStore); an error means nothing must be
// resolved, and says what to do (journal.ErrKeyIgnoringFull: make room
// with idem key-ignoring remove, then resolve again). An endpoint too
// long ever to be journaled (journal.ErrInvalid) is no error: the open
// operations to it a send of which may have executed are flagged
// ReviewKeyIgnored first, their flags then telling the next process, as
// they are when s keeps no endpoints (not a KeyIgnoringStore, or
// ErrKeyIgnoringUnkept). nil for any other rec. A nil rec is
// ErrInvalidRequest.
func KeepKeyIgnoringBeforeResolve(ctx context.Context, s Store, rec *journal.Record) error {
	if rec == nil {
		return errorf("idem: resolve: %w: no record; pass the one read from the Store (Get)", ErrInvalidRequest)
	}
	if !journal.FlaggedKeyIgnored(rec) {
		return nil
	}
	var err error
	kept := false
	if ks, ok := s.(KeyIgnoringStore); ok {
		err = ks.AddKeyIgnoring(ctx, endpoint(rec))
		kept = err == nil
		if errors.Is(err, ErrKeyIgnoringUnkept) {
			err = nil
		}
	}
	if err := keptForResolve(ctx, s, rec, flagUnkept(ctx, s, rec, kept, err)); err != nil {
		return errorf("idem: resolve (scope %q, key %q): %w", rec.Scope, rec.Key, withCause(ctx, err))
	}
	return nil
}

// flaggedForIgnoring begins keptForResolve's errors.
const flaggedForIgnoring = "it is flagged for an endpoint that ignores the idempotency key, which a restarted process may know from that flag alone"

// keptForResolve judges, before a resolution clears the flag of rec,
// flagged ReviewKeyIgnored, the journaling of its endpoint, which ended
// in err (nil also when the Store keeps no endpoints): an error, nothing
// to be written, says what to do. One too long ever to be journaled
// (journal.ErrInvalid) is not refused, a resolution being the only way
// out for its operations: the open ones to it a send of which may have
// executed are flagged first (flagSentTo), so that their flags still
// tell the next process.
func keptForResolve(ctx context.Context, s Store, rec *journal.Record, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, journal.ErrKeyIgnoringFull):
		return fmt.Errorf("%s; the journal keeps as many such endpoints as it can, so nothing was written and it stays flagged: "+
			"make room (idem key-ignoring remove, Client.ForgetKeyIgnoring: endpoints no longer called), then resolve it again: %w", flaggedForIgnoring, err)
	case errors.Is(err, journal.ErrInvalid):
		if _, err := flagSentTo(ctx, s, endpoint(rec), true, nil); err != nil {
			return fmt.Errorf("%s, too long to be journaled; the open operations to it that may have executed could not all be flagged first, so nothing was resolved: resolve it again: %w", flaggedForIgnoring, err)
		}
		return nil
	}
	return fmt.Errorf("%s; it could not be journaled, so nothing was written: resolve it again once the journal takes writes: %w", flaggedForIgnoring, err)
}

// keepEndpoint journals endpoint e as ignoring the key (a Store that
// keeps it already writes nothing) and waits for the commit, within ctx
// and saveIgnoringTimeout; kept is false, err nil, when the Store keeps
// no endpoints (none, or ErrKeyIgnoringUnkept), as saveIgnoring reads it.
func (c *Client) keepEndpoint(ctx context.Context, e string) (kept bool, err error) {
	ks, ok := c.store.(KeyIgnoringStore)
	if !ok {
		return false, nil
	}
	sctx, cancel := context.WithTimeout(ctx, saveIgnoringTimeout)
	defer cancel()
	err = ks.AddKeyIgnoring(sctx, e)
	if err == nil {
		c.ignoring.mu.Lock()
		c.ignoring.markUnsaved(e, false)
		c.ignoring.mu.Unlock()
	}
	if errors.Is(err, ErrKeyIgnoringUnkept) {
		c.logUnkept(ctx, err)
		return false, nil
	}
	if errors.Is(err, journal.ErrKeyIgnoringFull) {
		c.logFull(ctx, e, err)
	}
	return err == nil, err
}

// logFull logs, once per Client, that the journal's endpoints ignoring
// the key are at their bound: every endpoint learnt past it, and every
// operation flagged for one, would log it again.
func (c *Client) logFull(ctx context.Context, e string, err error) {
	if c.ignoring.fullLogged.Swap(true) {
		return
	}
	c.log.LogAttrs(ctx, slog.LevelWarn,
		"idem: the journal keeps as many endpoints that ignore the idempotency key as it can; one learnt now is not journaled, and the operations flagged for it stay flagged (no Confirm, Resolve or result query settles them) until room is made: remove the endpoints no longer called (idem key-ignoring remove, Client.ForgetKeyIgnoring)",
		slog.String("endpoint", e), slog.Any("err", err))
}

// saveDone, under mu, ends a save counted as under way (saving), waking
// the waitSaves waiting for the last.
func (k *keyIgnoring) saveDone() {
	if k.saving--; k.saving == 0 && k.saved != nil {
		close(k.saved)
		k.saved = nil
	}
}

// markUnsaved records, under mu, whether endpoint e's last save failed.
func (k *keyIgnoring) markUnsaved(e string, failed bool) {
	switch {
	case failed:
		if k.unsaved == nil {
			k.unsaved = make(map[string]struct{})
		}
		k.unsaved[e] = struct{}{}
	case k.unsaved != nil:
		delete(k.unsaved, e)
	}
}

// saveUnsaved journals again the endpoints whose save failed (unsaved),
// each within ctx and saveIgnoringTimeout (keepEndpoint), only rec's if
// rec is not nil. Failures are logged; the endpoint stays unsaved.
func (c *Client) saveUnsaved(ctx context.Context, rec *journal.Record) {
	k := &c.ignoring
	k.mu.Lock()
	var todo []string
	want := ""
	if rec != nil {
		want = endpoint(rec)
	}
	for e := range k.unsaved {
		if rec == nil || e == want {
			todo = append(todo, e)
		}
	}
	if len(todo) == 0 {
		k.mu.Unlock()
		return
	}
	// Counted as under way, as saveIgnoring's are: ForgetKeyIgnoring
	// waits for it (waitSaves), else the operator's removal, made while
	// this write was in flight, was undone by it in the journal.
	k.saving++
	k.mu.Unlock()
	defer func() {
		k.mu.Lock()
		defer k.mu.Unlock()
		k.saveDone()
	}()
	for _, e := range todo {
		if _, err := c.keepEndpoint(ctx, e); err != nil && !errors.Is(err, journal.ErrKeyIgnoringFull) { // logged once
			c.log.LogAttrs(ctx, slog.LevelWarn,
				"idem: could not journal an endpoint that ignores the idempotency key, again; its flagged operations still tell the next process",
				slog.String("endpoint", e), slog.Any("err", err))
		}
	}
}

// keepLearnt journals rec's endpoint, just learnt from rec's answer to
// ignore the key, before that answer's outcome is committed unflagged
// (submit): it waits for the save under way (waitSaves) and makes a
// failed one once more (saveUnsaved). An endpoint not journaled even so
// (the Store's commit outlasted saveIgnoringTimeout: a stalled fsync, a
// database failing over; or failed again: the journal's endpoints at
// their bound; or the Store keeps none) has its other open operations a
// send of which may have executed flagged ReviewKeyIgnored first
// (flagSentTo): killed after the outcome's commit, or restarted, the
// process left nothing else to tell the next one, whose Resume resent
// each under the same key, a second charge. Within ctx, as the outcome's
// commit is, and bounded by saveIgnoringTimeout as the save is: the bbolt
// journal's walk waits for the applier, whose lock a stalled save of the
// endpoint holds (an fsync on a dying disk), and heeds no context, so it
// goes on beside the drive, flagging what it can once the applier does.
// A failure is logged. It reports whether the endpoint is journaled or
// its operations flagged: false, the outcome keeps the trace itself
// (submit flags rec).
func (c *Client) keepLearnt(ctx context.Context, rec *journal.Record) bool {
	e := endpoint(rec)
	k := &c.ignoring
	// A Store that keeps no endpoints (no KeyIgnoringStore: no save; or
	// none yet, ErrKeyIgnoringUnkept: unsaved) journals nothing of it
	// either: the flags are all that tell the next process, whose Resume
	// resent each otherwise, after a clean restart too.
	if k.save != nil && c.waitSaves(ctx) == nil {
		c.saveUnsaved(ctx, rec)
		k.mu.Lock()
		_, unsaved := k.unsaved[e]
		k.mu.Unlock()
		if !unsaved {
			return true
		}
	}
	type walked struct {
		n   int
		err error
	}
	done := make(chan walked, 1)
	go func() {
		n, err := flagSentTo(ctx, c.store, e, true, rec)
		done <- walked{n, err}
	}()
	t := time.NewTimer(saveIgnoringTimeout)
	defer t.Stop()
	var w walked
	select {
	case w = <-done:
	case <-t.C:
		w.err = errSaveUnderWay
	}
	if w.err != nil {
		c.log.LogAttrs(ctx, slog.LevelWarn,
			"idem: an endpoint that ignores the idempotency key is not journaled yet, and its open operations that may have executed could not all be flagged for review; the operation that taught it is flagged instead",
			slog.String("endpoint", e), slog.Int("flagged", w.n), slog.Any("err", w.err))
		return false
	}
	c.log.LogAttrs(ctx, slog.LevelWarn,
		"idem: an endpoint that ignores the idempotency key is not journaled yet; its open operations that may have executed are flagged for review",
		slog.String("endpoint", e), slog.Int("flagged", w.n))
	return true
}

// errSaveUnderWay: a Store still journaling an endpoint learnt to ignore
// the key past saveIgnoringTimeout (one that does not heed its context).
// A wait that timed out, as context.DeadlineExceeded says: the admin
// handler answers it 503, to be tried again.
var errSaveUnderWay = fmt.Errorf("idem: an endpoint learnt to ignore the key is still being journaled (the Store is slow to commit); nothing was removed: try again: %w", context.DeadlineExceeded)

// ignoringLearntFirst is ignoringLearnt before a first send, which does
// not wait for a walk under way (another caller's, that may be long): a
// send made while the endpoints are unread goes out once (submit), as to
// an endpoint known to ignore the key, so that net/http's own resend of
// it on a dead reused connection is not a second charge there. Only the
// Client's first such send walks: a walk that fails, or whose caller's
// context ends, leaves the endpoints unread and the sends going out once,
// which is safe, while a walk of every first send would cost each Submit
// a walk of the open operations (up to a damaged page of the index, every
// time) to spare a status query. A resend, a Confirm that may flag, Resume
// and Run still walk until one succeeds.
func (c *Client) ignoringLearntFirst(ctx context.Context) {
	k := &c.ignoring
	if k.learnt.Load() || k.firstTried.Swap(true) {
		return
	}
	k.mu.Lock()
	busy := k.walking != nil
	k.mu.Unlock()
	if !busy {
		_ = c.ignoringLearnt(ctx)
	}
}

// errUnflaggable: the record a confirmation is about to settle is not one
// markIgnoredBeforeConfirm flags; nothing is written.
var errUnflaggable = errors.New("idem: not flagged for an endpoint that ignores the key")

// markIgnoredBeforeConfirm flags prior's operation ReviewKeyIgnored before
// a confirmation settles it (wctx: the write's) when its endpoint is known
// to ignore the key, by this process, an earlier one or another Client on
// the journal (knowsIgnoring), and more than one of its sends may have
// executed, as a drive blocked from resending it would have
// (markIgnored): the server took each send
// for a new request and the event tells of one, so ApplyConfirmation
// turns the flag into ReviewMaybeTwice. Unflagged (both answers lost
// before anything said the endpoint ignores the key, and no drive has
// visited it since), it was settled clean, two charges possible. After
// one send nothing is written: the confirmation settles it as before.
// prior nil (no record) writes nothing. It returns the record it flagged
// (nil if none): Confirm reports the flagging (Hooks.Review) if the
// confirmation then fails, since the redelivery finds it flagged and
// calls Settle only. A commit whose answer was lost is read back, as a
// drive's is. An error leaves the confirmation unrecorded, to be
// delivered again; a flag written before it is what a drive would write,
// and the redelivery reads it.
func (c *Client) markIgnoredBeforeConfirm(ctx, wctx context.Context, prior *journal.Record) (*journal.Record, error) {
	flaggable := func(r *journal.Record) bool {
		return r.Open() && ignoredUnflagged(r) && journal.SentTwice(r)
	}
	if prior == nil || !flaggable(prior) {
		return nil, nil
	}
	if known, err := c.knowsIgnoring(ctx, prior); err != nil || !known {
		return nil, err
	}
	rec, err := c.store.Update(wctx, prior.Scope, prior.Key, func(r *journal.Record) error {
		if !flaggable(r) {
			return errUnflaggable // flagged or moved on since: the confirmation reads it as it is
		}
		r.Review = ReviewKeyIgnored
		return nil
	})
	if errors.Is(err, journal.ErrMaybeCommitted) && !storeStalled(err) {
		// Flagged, by this write or by a drive's meanwhile: either way
		// what the confirmation must find.
		if cur, gerr := c.readAgain(wctx, wctx, prior.Scope, prior.Key); gerr == nil && cur.Open() && cur.Review == ReviewKeyIgnored {
			return cur, nil
		}
	}
	if errors.Is(err, errUnflaggable) || errors.Is(err, journal.ErrTerminal) {
		return nil, nil // settled since: the confirmation agrees with it, or contradicts it
	}
	return rec, err
}

// ignoredUnflagged reports whether r is flagged for nothing that
// ReviewKeyIgnored must not replace: not at all, or only ReviewKeyMoved,
// which says where a Client put the key, not what the sends did. Kept,
// it would have the event that settles r clear it, where two sends to an
// endpoint that ignores the key may each have charged (ReviewMaybeTwice):
// release 2's Resume at start-up flags release 1's operations before any
// answer has taught it the endpoint.
func ignoredUnflagged(r *journal.Record) bool {
	return r.Review == "" || r.Review == ReviewKeyMoved
}

// forget drops endpoint e, reporting whether it was known.
func (k *keyIgnoring) forget(e string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	here, ok := k.set[e]
	if !ok {
		return false
	}
	delete(k.set, e)
	k.markUnsaved(e, false) // forgotten: not saved again
	if here {
		k.learntHere--
	}
	k.any.Store(len(k.set) > 0)
	return true
}

// known returns the endpoints known, unordered.
func (k *keyIgnoring) known() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := make([]string, 0, len(k.set))
	for e := range k.set {
		out = append(out, e)
	}
	return out
}

// KeyIgnoringEndpoints returns, sorted, the endpoints the Client takes to
// ignore the idempotency key (an answer's Idempotency-Status: ignored),
// each its method, a space and its URL without userinfo, query or
// fragment, as ForgetKeyIgnoring takes it: those its Store keeps
// (KeyIgnoringStore), those it learnt while it runs, and those the open
// operations flagged for one (ReviewKeyIgnored) teach it, which it reads
// first if no send has yet. An operation to one of them whose answer is
// lost is flagged for review, never resent. For an operator (the admin
// handler's GET /key-ignoring).
func (c *Client) KeyIgnoringEndpoints(ctx context.Context) ([]string, error) {
	if err := c.enter(ctx); err != nil {
		return nil, err
	}
	defer c.exit()
	// What the first resend would read (ignoringLearnt) is what this
	// process acts on; unread, a list would leave those out.
	if err := c.ignoringLearnt(ctx); err != nil {
		return nil, errorf("idem: list the endpoints ignoring the key: %w", withCause(ctx, err))
	}
	out := c.ignoring.known()
	if ks, ok := c.store.(KeyIgnoringStore); ok {
		// Another process on the journal (a pgjournal replica) may have
		// journaled one since this one read them.
		kept, err := ks.KeyIgnoringEndpoints(ctx)
		if err != nil && !errors.Is(err, ErrKeyIgnoringUnkept) {
			return nil, errorf("idem: list the endpoints ignoring the key: %w", withCause(ctx, err))
		}
		out = append(out, kept...)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// ForgetKeyIgnoring removes endpoint, as KeyIgnoringEndpoints names it,
// from the endpoints known to ignore the idempotency key: from the Store
// (KeyIgnoringRemover) and from this Client's memory, so that an
// operation to it whose answer is lost is resent under the same key again
// from now on. It reports whether the endpoint was known to either. For
// an operator whose endpoint was learnt wrongly (a provider's incident, a
// proxy that added Idempotency-Status: ignored) or whose provider has
// since made it de-duplicate by the key.
//
// Only what is sent from now on: when the endpoint is known to ignore
// the key (this Client's memory, the Store, or an open operation flagged
// for it), the open operations to it a send of which may have executed
// while it was taken to ignore the key, unflagged or flagged for a
// reason that does not stop a resend, are flagged ReviewKeyIgnored
// first, as a drive visiting them would have (RemoveKeyIgnoring): the
// endpoint kept no key for what it ran then, and a resend under the same
// key would run again, a second charge. The flagged operations stay
// flagged (never resent) until settled by hand (Resolve), and while one
// of them is open, any process learns the endpoint from it again, and
// journals it again: this one when a Resume, a Run pass or a drive reads
// it, another at its start-up, and Resolve journals it again before it
// clears one's flag (the flag may be its one trace). Resolve them
// first. Other processes
// sharing the journal (pgjournal replicas) keep the endpoint in memory
// until they restart or are told to forget it too. An answer that says
// so again teaches it again.
//
// A name no endpoint has (not "METHOD URL", or a URL with a
// user:password@, a query or a fragment) is an error matching
// ErrInvalidRequest that does not quote it. A Store that keeps the
// endpoints but cannot remove them (a KeyIgnoringStore that is not a
// KeyIgnoringRemover) is an error matching errors.ErrUnsupported,
// nothing forgotten: a next process would read the endpoint back. It
// waits, up to 10 s and while ctx lasts, for the endpoints being
// journaled (as Close does), so that none lands after the removal; if
// one is still under way then, it removes nothing and returns ctx's
// cause (context.Cause), or an error matching context.DeadlineExceeded
// that says to try again. While a Store that would remove the endpoint
// holds open operations a newer idem wrote (a rollback left them; its
// Stats counts them, NewerOpen), none of which this build can read or
// flag, it forgets nothing and returns an error matching
// journal.ErrVersion: remove the endpoint with the newer idem. The
// removal is logged at Warn.
func (c *Client) ForgetKeyIgnoring(ctx context.Context, endpoint string) (bool, error) {
	if err := c.enter(ctx); err != nil {
		return false, err
	}
	defer c.exit()
	if err := checkEndpointName(endpoint); err != nil {
		return false, errorf("idem: forget an endpoint ignoring the key: %w", err)
	}
	// A walk under way (ignoringLearnt) would put it back in memory
	// after the removal, and a save under way back in the journal. A walk
	// that fails leaves the next one to read the journal, without it.
	_ = c.ignoringLearnt(ctx)
	if err := c.waitSaves(ctx); err != nil {
		// Removed before the save lands, the endpoint would be back in
		// the journal with nothing said: the operator's forget undone
		// at the next start-up.
		return false, errorf("idem: forget an endpoint ignoring the key: %w", err)
	}
	// Refused before the mark below goes: an endpoint left in memory
	// whose failed save is never made again would be lost at restart.
	if err := refuseOverNewerOpen(ctx, c.store); err != nil {
		return false, errorf("idem: forget an endpoint ignoring the key: %w", withCause(ctx, err))
	}
	// A save of it that failed is not made again (saveUnsaved) once its
	// mark is gone, and one made again since the wait above is waited
	// for now: landing after the removal, it undid the forget.
	c.ignoring.mu.Lock()
	c.ignoring.markUnsaved(endpoint, false)
	c.ignoring.mu.Unlock()
	if err := c.waitSaves(ctx); err != nil {
		return false, errorf("idem: forget an endpoint ignoring the key: %w", err)
	}
	removed, flagged, err := removeKeyIgnoring(ctx, c.store, endpoint, slices.Contains(c.ignoring.known(), endpoint))
	if errors.Is(err, ErrKeyIgnoringUnkept) {
		err = nil // no place for them: none kept
	}
	if err != nil {
		return false, errorf("idem: forget an endpoint ignoring the key: %w", withCause(ctx, err))
	}
	forgotten := c.ignoring.forget(endpoint)
	if removed || forgotten {
		c.log.LogAttrs(ctx, slog.LevelWarn,
			"idem: forgot an endpoint that ignores the idempotency key; its lost answers are resent under the same key again, but for operations still flagged for it",
			slog.String("endpoint", endpoint), slog.Int("flagged", flagged))
	}
	return removed || forgotten, nil
}

// RemoveKeyIgnoring removes endpoint from the endpoints s keeps as
// ignoring the idempotency key (KeyIgnoringRemover), as
// Client.ForgetKeyIgnoring does but for the Client's memory: for a tool
// on the journal (idem key-ignoring remove on a file or a pgjournal). It
// reports whether s kept it, and how many operations it flagged first:
// those open to the endpoint, unflagged or flagged for a reason that
// does not stop a resend, a send of which may have executed; none when
// the endpoint is not known to ignore the key (neither kept by s nor
// named by an open operation flagged ReviewKeyIgnored), which may
// de-duplicate. What the endpoint ran while it ignored the key it kept no key
// for, and a resend under the same key, which a process that no longer
// knows the endpoint would make, would run again; flagged
// ReviewKeyIgnored, it is never resent, as a drive that visited it before
// the removal would have left it. An error leaves the endpoint kept, and
// what was flagged flagged. A Store with no place for the endpoints yet
// (ErrKeyIgnoringUnkept, returned), or one that keeps none (not a
// KeyIgnoringStore), knows the endpoint only from an open operation
// flagged for it: it flags only then, and removes nothing. One that
// keeps them but cannot remove them is an error matching
// errors.ErrUnsupported, nothing flagged. One that holds open
// operations a newer idem wrote (ForgetKeyIgnoring) is an error matching
// journal.ErrVersion, nothing flagged or removed.
func RemoveKeyIgnoring(ctx context.Context, s Store, endpoint string) (removed bool, flagged int, err error) {
	if err := checkEndpointName(endpoint); err != nil {
		return false, 0, errorf("idem: remove an endpoint ignoring the key: %w", err)
	}
	if err := refuseOverNewerOpen(ctx, s); err != nil {
		return false, 0, errorf("idem: remove an endpoint ignoring the key: %w", withCause(ctx, err))
	}
	removed, flagged, err = removeKeyIgnoring(ctx, s, endpoint, false)
	if err != nil {
		return false, flagged, errorf("idem: remove an endpoint ignoring the key: %w", withCause(ctx, err))
	}
	return removed, flagged, nil
}

// refuseOverNewerOpen refuses the removal of an endpoint from s while s
// holds open records written by a newer idem (a rollback left them),
// which ForEachOpen skips: one sent to the endpoint whose answer was lost
// would go unflagged, and the newer idem, running again without the
// endpoint, would resend it under the same key, which the endpoint kept
// for nothing. Only a Store that would remove the endpoint
// (KeyIgnoringRemover) and counts those records (NewerOpenCounter, else
// StatsStore) is asked.
func refuseOverNewerOpen(ctx context.Context, s Store) error {
	if _, removes := s.(KeyIgnoringRemover); !removes {
		return nil
	}
	var n int
	switch c := s.(type) {
	case NewerOpenCounter:
		var err error
		if n, err = c.NewerOpen(ctx); err != nil {
			return err
		}
	case StatsStore:
		st, err := c.Stats(ctx)
		if err != nil {
			return err
		}
		n = st.NewerOpen
	}
	if n == 0 {
		return nil
	}
	return fmt.Errorf("the journal holds %d open operation(s) written by a newer idem, which this one cannot read (%w): "+
		"one sent to the endpoint with its answer lost would go unflagged, and the newer idem, no longer knowing the endpoint, "+
		"would resend it under the same key (a second charge); remove the endpoint with the newer idem",
		n, journal.ErrVersion)
}

// checkEndpointName refuses a name no endpoint has: endpoint() names
// one "METHOD URL", the method a token, the URL absolute (http or
// https) without its userinfo, query or fragment. The error does not
// quote it: an operator pasting the URL they call (no method, or with a
// tab, ?api_key=... or user:password@ in it) would have the secret
// printed and logged with the error, and answered by the admin handler.
func checkEndpointName(e string) error {
	const want = "; pass it as listed (KeyIgnoringEndpoints, idem key-ignoring): METHOD URL"
	if e == "" {
		return errorf("idem: %w: empty endpoint%s", ErrInvalidRequest, want)
	}
	method, u, ok := strings.Cut(e, " ")
	if !ok || method == "" || strings.IndexFunc(method, func(r rune) bool { return r < 'A' || r > 'Z' }) >= 0 {
		return errorf("idem: %w: the endpoint does not begin with a method and one space%s", ErrInvalidRequest, want)
	}
	if strings.ContainsAny(u, "?#") {
		return errorf("idem: %w: the endpoint's URL carries a query or fragment, which no endpoint name holds%s", ErrInvalidRequest, want)
	}
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok || !strings.EqualFold(scheme, "http") && !strings.EqualFold(scheme, "https") || strings.ContainsFunc(u, unicode.IsSpace) {
		return errorf("idem: %w: the endpoint's URL is not an absolute http or https URL%s", ErrInvalidRequest, want)
	}
	host, _, _ := strings.Cut(rest, "/")
	if host == "" || strings.Contains(host, "@") {
		return errorf("idem: %w: the endpoint's URL has no host, or carries a user or password (user:password@), which no endpoint name holds%s", ErrInvalidRequest, want)
	}
	return nil
}

// removeKeyIgnoring is RemoveKeyIgnoring, its errors unwrapped. known:
// the caller knows endpoint to ignore the key (a Client's memory); else
// it is known if s keeps it or an open operation is flagged for it.
func removeKeyIgnoring(ctx context.Context, s Store, endpoint string, known bool) (removed bool, flagged int, err error) {
	ks, keeps := s.(KeyIgnoringStore)
	kr, removes := s.(KeyIgnoringRemover)
	if keeps && !removes {
		return false, 0, fmt.Errorf("%w: the Store (%T) keeps the endpoints ignoring the key and has no RemoveKeyIgnoring (KeyIgnoringRemover)", errors.ErrUnsupported, ks)
	}
	if keeps && !known {
		kept, err := ks.KeyIgnoringEndpoints(ctx)
		if err != nil && !errors.Is(err, ErrKeyIgnoringUnkept) {
			return false, 0, err
		}
		known = slices.Contains(kept, endpoint)
	}
	if flagged, err = flagSentTo(ctx, s, endpoint, known, nil); err != nil || !removes {
		return false, flagged, err
	}
	removed, err = kr.RemoveKeyIgnoring(ctx, endpoint)
	return removed, flagged, err
}

// flagSentTo flags ReviewKeyIgnored the open operations to endpoint e that
// sentToIgnoring holds for, and returns how many it flagged; none if e is
// not known to ignore the key (known, or an open operation flagged for
// it). An endpoint never known (a typo, the wrong one of several paths)
// may de-duplicate by the key: flagged, its lost answers would never be
// resent, and every process would learn it as ignoring the key from them
// (keyIgnoring.relearn), a de-duplicating endpoint's later lost answers
// left for a person too.
//
// except, if not nil, is left as it is: the operation whose answer taught
// the endpoint, which its drive settles or flags itself (keepLearnt).
func flagSentTo(ctx context.Context, s Store, e string, known bool, except *journal.Record) (int, error) {
	var refs [][2]string // scope, key
	if err := s.ForEachOpen(ctx, func(r *journal.Record) error {
		if r.Review == ReviewKeyIgnored && endpoint(r) == e {
			known = true
		}
		if sentToIgnoring(r, e) && (except == nil || r.Scope != except.Scope || r.Key != except.Key) {
			refs = append(refs, [2]string{r.Scope, r.Key})
		}
		return nil
	}); err != nil {
		return 0, err
	}
	if !known {
		return 0, nil
	}
	n := 0
	for _, ref := range refs {
		_, err := s.Update(ctx, ref[0], ref[1], func(r *journal.Record) error {
			if !sentToIgnoring(r, e) {
				return errUnflaggable // flagged or moved on since
			}
			setReview(r, ReviewKeyIgnored)
			return nil
		})
		switch {
		case err == nil:
			n++
		case errors.Is(err, errUnflaggable), errors.Is(err, journal.ErrTerminal), errors.Is(err, journal.ErrNotFound):
		default:
			// Unsure whether it landed (journal.ErrMaybeCommitted) is an
			// error too: the endpoint stays, and a removal tried again
			// finds the operation flagged or flags it.
			return n, err
		}
	}
	return n, nil
}

// sentToIgnoring reports whether r is open to endpoint e, a send of it
// may have executed, and a drive would flag it ReviewKeyIgnored while e
// is known to ignore the key (resendBlock, driver.flag). Not only
// unflagged ones: a flag that does not stop a caller's Do or Submit from
// resending (ReviewRefusedAfterSend, ReviewDeadlinePassed,
// ReviewClockStepped) would let the resend go once e is forgotten, a
// second charge. One that stops every resend on its own (flagBlock:
// ReviewKeyInUse, ReviewKeyExpired, ReviewFinalAnswer, whose replay
// shows the endpoint keeps the key) is left as a drive leaves it, and a
// held one as setReview keeps it.
func sentToIgnoring(r *journal.Record, e string) bool {
	if !r.Open() || endpoint(r) != e {
		return false
	}
	switch {
	case r.Review == ReviewKeyIgnored, r.Review == ReviewKeyInUse, r.Review == ReviewKeyExpired,
		strings.HasPrefix(r.Review, ReviewFinalAnswer):
		return false
	}
	return reviewAfter(r.Review, ReviewKeyIgnored) == ReviewKeyIgnored && pastOf(r, math.MaxInt).maybeExecuted
}
