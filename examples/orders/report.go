package main

import (
	"fmt"
	"io"
	"time"
)

// printSummary writes the summary table. Every number comes from the
// journal, the client's hooks or the fake server's counters.
func printSummary(w io.Writer, cfg config, s summary) {
	row := func(label string, n int, note string) {
		if note != "" {
			note = "  " + note
		}
		fmt.Fprintf(w, "  %-26s %6d%s\n", label, n, note)
	}
	fmt.Fprintf(w, "\nidem demo: %d orders, %d workers, seed %d\n\n", s.Orders, cfg.Workers, cfg.Seed)

	fmt.Fprintln(w, "journal")
	row("operations", s.Operations, "one key each")
	row("succeeded", s.Succeeded, "")
	row("failed", s.Failed, "refused by the server (card declined)")
	row("unknown", s.Open-s.Review, "still open at the end")
	row("flagged for review", s.Review, "open, waiting for a person")
	fmt.Fprintln(w)

	fmt.Fprintln(w, "how the calls ended")
	row("settled in the call", s.SettledAtOnce, "")
	row("handed to the reconciler", s.HandedOff, "ErrUnknownOutcome: journaled, not failed")
	if s.CrashedAt > 0 {
		row("abandoned by the crash", s.Abandoned, fmt.Sprintf("in flight when the process died, after %d answers", s.CrashedAt))
		// Resume takes every operation open in the journal, not only those
		// the crash cut short: the calls handed off before the crash are
		// open too (the dead process's reconciler never settled them), and
		// an abandoned call the crash stopped before its journal write has
		// nothing to resume. Say so, or "resumed" > "abandoned" looks wrong.
		o := s.OpenAtRestart
		why := fmt.Sprintf("open in the journal: %d abandoned by the crash, %d handed off before it", o.Abandoned, o.HandedOff)
		if o.Other > 0 {
			why += fmt.Sprintf(", %d other", o.Other)
		}
		row("resumed", s.Resume.Visited, why)
		fmt.Fprintf(w, "  %-26s %6s  Resume: %d succeeded, %d failed, %d still open\n", "", "",
			s.Resume.Succeeded, s.Resume.Failed, s.Resume.Processing+s.Resume.Unknown+s.Resume.Pending+s.Resume.Review)
	}
	row("settled in the background", s.SettledInBackground, "reported by WithSettleFunc (Resume and Run)")
	row("attempts", s.Attempts, "HTTP exchanges, from the client's hooks")
	row("result queries", s.Queries, "of those, GET /operations/{key}")
	fmt.Fprintln(w)

	fmt.Fprintln(w, "fake server")
	row("requests", s.Server.Requests, fmt.Sprintf("%d submits, %d queries (net/http resends included)", s.Server.Submits, s.Server.Queries))
	row("replays", s.Server.Replays, "same key resent: stored answer, no new order")
	row("orders created", s.Server.SideEffects, "")
	row("server-side duplicates", s.Duplicates, fmt.Sprintf("sum over keys of (orders - 1); max orders per key %d", s.MaxEffectsPerKey))
	row("lost", s.Lost, "acknowledged, then missing or open with nobody told")
	if s.Disagree > 0 {
		row("journal/server disagree", s.Disagree, "succeeded with no order, failed with one, or orders under unknown keys")
	}
	if s.NotSubmitted > 0 {
		row("never acknowledged", s.NotSubmitted, "Submit never returned a result")
	}
	for _, o := range s.OpenSamples {
		fmt.Fprintln(w, "still open:", o)
	}
	for _, e := range s.Errors {
		fmt.Fprintln(w, "error:", e)
	}
	kept := "kept: go run ./cmd/idem -journal " + s.JournalPath + " list"
	if cfg.Journal == "" {
		kept = "temporary, removed"
	}
	fmt.Fprintf(w, "\nelapsed %v; journal %s (%s)\n", s.Elapsed.Round(10*time.Millisecond), s.JournalPath, kept)
	verdict := "OK: every order exists exactly once on the server, and none was lost"
	if !s.OK() {
		verdict = "FAILED"
	}
	fmt.Fprintf(w, "server-side duplicates: %d; lost: %d; %s\n", s.Duplicates, s.Lost, verdict)
}
