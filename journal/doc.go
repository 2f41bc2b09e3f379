// Package journal is idem's write-ahead journal: a bbolt file, and the log
// beside it, that hold every operation the client has taken on, from
// before its first send until it is settled and pruned. The client
// ([github.com/idemkit/idem]) writes an operation here, fsync'd, before
// anything goes out, and records each attempt and answer as they happen,
// so that a process that crashes at any point can be restarted and finish
// what it started without sending anything twice or losing anything.
//
// # The file and its log
//
// A write is durable once it is in the log: segment files named after the
// journal (payments.journal.log.0000000000000001, …), appended to with one
// write and one fdatasync per round of concurrent writes. The Store keeps
// what the log holds in memory until a background applier has copied it
// into the bbolt file, in fsync'd transactions, every 25 ms or so (an
// open record written less than a second ago waits: it will most likely
// settle, and then reach the file once); the file records how far it has
// copied, and the applier then deletes the
// segments it no longer needs. Reads see the latest write at once; scans
// (Due, List, Stats, …) first bring the file up to date. Open reads the
// log back: whatever it holds that the file does not (a process that
// stopped without Close) is there again, for reads at once and in the file
// once applied; a write a crash interrupted (never acknowledged) is there
// whole or not at all. Close applies the whole log and deletes it, so that a journal
// closed cleanly is its file alone. To copy a journal, stop the
// application first, or copy the file and every segment together.
//
// Most programs never use this package directly: [github.com/idemkit/idem.Open]
// opens a journal and owns it. It is for programs that open the Store
// themselves (to pass options, or to share one Store between clients), for
// operator tools such as cmd/idem, and for implementers of another Store.
//
// # Records and states
//
// A [Record] is one operation, named by its Scope (the caller's identity
// or account) and its idempotency Key: the exact request (method, URL,
// non-secret headers, body and its SHA-256), every [Attempt] made for it,
// the server's [Result], and the times that drive it (Created, FirstSent,
// NextDue, Settled). It holds everything needed to resume the operation
// with no help from the caller, and never a credential.
//
// Its [State] is one of pending, processing and unknown (open: due for
// reconciliation at NextDue) or succeeded and failed (terminal). [Store.Update]
// never changes a terminal record ([ErrTerminal]), nor the request itself
// ([ErrInvalid]); only [Store.Resolve], a settlement made by hand, may
// correct a terminal record, and it records who did it and why.
// [Store.Confirm] records an outcome learned from outside (a provider's
// webhook event), as [ApplyConfirmation] decides: it settles an open
// record, and on a terminal one it only records the event and, if the
// event contradicts the record, flags it for review without changing its
// state.
//
// # What a Store promises
//
//   - Write-ahead: a write returns only once it is in the log and, unless
//     [WithUnsafeNoSync] was given, fsync'd. An error means "not written",
//     except one matching [ErrMaybeCommitted]: the disk failed the write,
//     and then failed the step that would have made sure of it, so the
//     write may or may not be in the journal; the caller must treat it as
//     neither done nor undone. A write the disk fails once is written
//     again, on a new segment that voids the first try.
//   - Nothing shown that the disk may lack: a commit of the file (the
//     applier's copy of the log, a [Store.Prune]) that fails once bbolt
//     has written it, at its fsync, may or may not be on disk, though the
//     file already shows it. Its error matches [ErrMaybeCommitted], and
//     every later call of the Store fails with the same cause, reads
//     included, until the journal is closed and opened again (the log
//     keeps every acknowledged write; that Open applies it). A commit
//     that fails before it is written (a full disk) is tried again later.
//   - Group commit: concurrent writes share one log write and one fsync,
//     so many goroutines writing at once cost few fsyncs. A queued write is
//     carried out even if its context ends.
//   - One writer: [Open] creates the file and its log segments with mode
//     0600 and takes the file's lock; a second Open, in this process or another, waits a bounded time
//     ([WithLockTimeout], [DefaultLockTimeout]) and then fails with
//     [ErrLocked], saying which of the two holds it. Open never waits for
//     ever.
//   - Fail closed: a file that is not a journal, is damaged or is truncated
//     gives [ErrCorrupt], and one written by a newer idem gives
//     [ErrVersion], without the file being changed; so does a log with a
//     hole where acknowledged writes were, or a segment of another
//     journal. A file a process stopped without closing, opened without
//     the log segments it depends on (copied alone, its segments
//     deleted), gives [ErrLogMissing], naming the segment, unless
//     [AcceptLostLog] is given; reads that meet a
//     damaged page or record return ErrCorrupt rather than crash or guess,
//     and a key is reported absent (to Create, Get, Update, …) only once
//     the pages searched for it have passed a check. A record written by
//     a newer idem (a rollback left it) fails every call naming its key
//     with ErrVersion, while the scans of open records, Prune, Stats and
//     Check go on past it (see [Store.ForEachOpen]), so that one such
//     record does not stop every other operation from being settled.
//     A journal in an older format is migrated in place, atomically, the
//     first time it is opened for writing ([ErrOldFormat] until then).
//   - Every [*Record] a Store returns is the caller's own copy, and the
//     Store never reads the clock: the caller sets every time in a record.
//
// Errors match the package's sentinels with [errors.Is]; their messages
// name the journal's path where it matters and say "journal: " once.
//
// # Operators
//
// [ReadOnly] opens a journal for inspection (several readers, no writer):
// nothing is created or changed, and writes return [ErrReadOnly]. Its
// reads merge the log, if a process left one, with the file.
// [Check] verifies a journal's pages, records and indexes ([Inspect] also
// reports what it read and lists each problem); [Compact]
// rewrites it without the free pages pruning leaves, checked and replaced
// atomically. All three need the application stopped. [Store.Prune] deletes
// records settled before a time; [Store.Stats] counts records by state.
// The idem command (cmd/idem) wraps all of these.
//
// # Other implementations
//
// The client depends only on the [github.com/idemkit/idem.Store] interface;
// [github.com/idemkit/idem/journal/journaltest.Run] is the conformance
// suite every implementation must pass, this one included.
package journal
