// Command idem inspects and settles the operations in an idem journal, the
// bbolt file in which the idem client records every payment or order
// operation before sending it.
//
// Use it while the application that owns the journal is stopped: a running
// application holds the journal's lock, and idem reports that instead of
// waiting for ever. list, show, stats, check and key-ignoring list open
// the journal read-only and never create or change the file; resolve,
// prune, compact and key-ignoring remove open it for writing. With -url
// (a running service's admin handler, package admin) list, show, stats,
// resolve and key-ignoring work on the live service instead.
//
// Usage:
//
//	idem [-journal PATH] [-lock-timeout DURATION] COMMAND [flags] [args]
//
// The journal is the -journal flag or, without it, $IDEM_JOURNAL. The
// global flags may also follow the command. The commands:
//
//	list [-state S[,S]] [-open] [-review] [-older-than D] [-scope S] [-limit N] [-json]
//	    List operations, oldest first, as a table or as a JSON array.
//	    The table's REASON column says why an operation is flagged for
//	    review, or why it failed, cut to fit.
//	show [-scope S] [-json] KEY
//	    Print one operation in full: request, state, result, manual
//	    resolution and the timeline of its attempts; when it is next
//	    due while open, when it settled once settled.
//	resolve [-scope S] KEY -succeeded|-failed -reason TEXT [-resource-id ID] [-by NAME] [-force]
//	    Settle an operation by hand, for instance one flagged for review
//	    after its key expired. The resolution is recorded in the journal
//	    with who, why, when and the state it replaced. An operation that
//	    is already succeeded or failed needs -force, one flagged for
//	    review too (a failure the server's word contradicts, a payment
//	    made twice). On a journal file (or with -dsn) no WithSettleFunc
//	    hears of it: the application learns of it by Lookup; with -url
//	    the running service's settle func does.
//	prune -settled-before D [-dry-run]
//	    Delete succeeded and failed operations settled more than D ago.
//	    Open operations are never pruned.
//	stats [-json]
//	    Count operations by state.
//	check [-json]
//	    Verify the journal: bbolt's page check, every record decodes, and
//	    the indexes agree with the records. -json prints one object, also
//	    for a journal that does not check out: journal (path), ok,
//	    problems (one string each, [] when ok), file_size (bytes), pages
//	    (in use) and records.
//	compact [-json] [-accept-lost-log]
//	    Rewrite the journal without the free pages pruning leaves behind
//	    (they make every commit rewrite a long free list), check the copy,
//	    and swap it in atomically. -json prints one object: journal
//	    (path), before and after (file sizes in bytes) and saved.
//	    -accept-lost-log goes on when the log segments the journal file
//	    depends on are missing (check reports them), the writes they held
//	    lost: only once they are known to be gone for good.
//	key-ignoring [list] [-json]
//	    List the endpoints journaled as ignoring the idempotency key (an
//	    answer said Idempotency-Status: ignored), one "METHOD URL" a line;
//	    -json prints {"endpoints": [...]}. An operation to one of them
//	    whose answer is lost is flagged for review, never resent.
//	key-ignoring remove [-json] ENDPOINT
//	    Remove one, learnt wrongly (a provider's incident, a proxy that
//	    added the header) or de-duplicating since: ENDPOINT as list prints
//	    it, quoted or as two arguments (METHOD URL). An unknown endpoint is
//	    an error. With -url the running service forgets it in memory too;
//	    otherwise a process running on the journal keeps it until it
//	    restarts. The open operations to it that may have executed are
//	    flagged "key ignored" first (never resent: the endpoint kept no
//	    key for them); they stay flagged, and a process learns the
//	    endpoint from them again (Resume, a Run pass reading them, its
//	    next start) and journals it again: settle them (list -review,
//	    resolve) and remove it again.
//
// Durations are Go durations (90m, 720h) or whole days (30d). show and
// resolve look in scope "default", the idem client's default, unless
// -scope says otherwise.
//
// Exit status: 0 on success, 1 when the command failed (locked, missing
// or damaged journal, unknown key or endpoint), 2 on a usage error.
package main
