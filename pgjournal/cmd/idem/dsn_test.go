package main

import (
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/journal"
)

// stampRE matches the times the command prints (to the millisecond, or
// RFC 3339 in JSON).
var stampRE = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`)

// withoutTimesAfter replaces the times after start, which the test's own
// resolutions wrote (two runs of resolve cannot share them), with "TIME".
func withoutTimesAfter(start time.Time, out string) string {
	return stampRE.ReplaceAllStringFunc(out, func(s string) string {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err == nil && !t.Before(start) {
			return "TIME"
		}
		return s
	})
}

// Every command prints the same for the live PostgreSQL journal as for a
// journal file with the same records; stats differs in its first line
// only (what it names), resolve in its time only.
func TestDSNMatchesFileMode(t *testing.T) {
	pg, path := seeded(t)
	start := time.Now()
	tests := []struct {
		args []string
		code int
	}{
		{[]string{"list"}, 0},
		{[]string{"list", "-state", "unknown,processing"}, 0},
		{[]string{"list", "-open"}, 0},
		{[]string{"list", "-review"}, 0},
		{[]string{"list", "-older-than", "1d"}, 0},
		{[]string{"list", "-scope", "acct-2"}, 0},
		{[]string{"list", "-limit", "2"}, 0},
		{[]string{"list", "-state", "failed", "-scope", "nobody"}, 0},
		{[]string{"list", "-json"}, 0},
		{[]string{"list", "-open", "-json"}, 0},
		{[]string{"show", "k-unknown"}, 0},
		{[]string{"show", "-scope", "acct-2", "k-other"}, 0},
		{[]string{"show", "k-failed"}, 0},
		{[]string{"show", "k-succeeded"}, 0},
		{[]string{"show", "-json", "k-unknown"}, 0},
		{[]string{"show", "k-nope"}, 1},
		{[]string{"show", "-scope", "acct-3", "k-other"}, 1}, // names the scope that holds it
		{[]string{"stats"}, 0},
		{[]string{"resolve", "k-unknown", "-succeeded", "-reason", "seen in the dashboard", "-by", "alice", "-resource-id", "ord_9"}, 0},
		{[]string{"show", "k-unknown"}, 0}, // the resolution, as recorded
		{[]string{"resolve", "k-succeeded", "-failed", "-reason", "refunded", "-by", "bob"}, 1}, // settled: needs -force
		{[]string{"resolve", "k-succeeded", "-failed", "-reason", "refunded", "-by", "bob", "-force"}, 0},
		{[]string{"resolve", "-scope", "acct-2", "k-other", "-failed", "-reason", "never sent", "-by", "bob"}, 0},
		{[]string{"resolve", "k-nope", "-failed", "-reason", "x", "-by", "bob"}, 1},
		{[]string{"list", "-json"}, 0}, // after the resolutions
	}
	for _, tt := range tests {
		name := strings.Join(tt.args, " ")
		wantOut, wantErr, code := runIdem(t, append([]string{"-journal", path}, tt.args...)...)
		require.Equal(t, tt.code, code, "file mode %s: %s", name, wantErr)
		out, errOut, code := runIdem(t, pg.args(tt.args...)...)
		require.Equal(t, tt.code, code, "dsn mode %s: %s", name, errOut)
		require.NotContains(t, out, secretToken, name)
		switch tt.args[0] {
		case "stats":
			require.True(t, strings.HasPrefix(out, "journal postgres://"), "%s: got %q", name, out)
			require.Contains(t, out, " schema "+pg.schema+" (")
			wantOut, out = wantOut[strings.Index(wantOut, "\n"):], out[strings.Index(out, "\n"):]
		}
		wantOut, out = withoutTimesAfter(start, wantOut), withoutTimesAfter(start, out)
		require.Equal(t, wantOut, out, "stdout of %s", name)
		require.Equal(t, wantErr, errOut, "stderr of %s", name)
	}
}

// stats -json counts as file mode does, and names the database without
// its password.
func TestDSNStatsJSON(t *testing.T) {
	pg, path := seeded(t)
	type stats struct {
		Journal string         `json:"journal"`
		ByState map[string]int `json:"by_state"`
		Open    int            `json:"open"`
		Review  int            `json:"review"`
		Total   int            `json:"total"`
	}
	var file, live stats
	out, errOut, code := runIdem(t, "-journal", path, "stats", "-json")
	require.Equal(t, 0, code, errOut)
	require.NoError(t, json.Unmarshal([]byte(out), &file))
	out, errOut, code = runIdem(t, pg.args("stats", "-json")...)
	require.Equal(t, 0, code, errOut)
	require.NoError(t, json.Unmarshal([]byte(out), &live))
	require.True(t, strings.HasPrefix(live.Journal, "postgres://"), "journal %q", live.Journal)
	file.Journal, live.Journal = "", ""
	require.Equal(t, file, live)
	require.Equal(t, stats{ByState: map[string]int{"pending": 2, "processing": 1, "unknown": 1, "succeeded": 1, "failed": 1},
		Open: 4, Review: 1, Total: 6}, live)
}

// resolve claims the operation first: a replica's live lease refuses it,
// naming the replica and the lease's end; -force takes the lease over, and
// the replica's next write is refused.
func TestDSNResolveRespectsLeases(t *testing.T) {
	pg, _ := seeded(t)
	ctx := context.Background()
	now := time.Now()
	expires := now.Add(time.Hour)
	rec, l, err := pg.store.Claim(ctx, "default", "k-unknown", "replica-7", now, expires)
	claimed := time.Now()
	require.NoError(t, err)
	require.Equal(t, journal.StateUnknown, rec.State)

	resolve := []string{"resolve", "k-unknown", "-succeeded", "-reason", "seen in the dashboard", "-by", "alice"}
	asked := time.Now()
	out, errOut, code := runIdem(t, pg.args(resolve...)...)
	answered := time.Now()
	require.Equal(t, 1, code, "resolve under a live lease: %s", out)
	require.Empty(t, out)
	require.Contains(t, errOut, "replica-7")
	// The end is reported in the CLI's clock, measured from the
	// database's: the CLI's reading of its clock plus what the
	// database's says is left, read a moment later (up to the CLI's whole
	// run, which a loaded machine may stretch past a second), of the end
	// the database set at the claim (up to the claim's own run after the
	// test's reading), to the second below. An offset of the database's
	// clock from ours counts in both, and cancels.
	m := regexp.MustCompile(`lease runs until (\S+) \(`).FindStringSubmatch(errOut)
	require.Len(t, m, 2, "the lease's end in %q", errOut)
	end, err := time.Parse(time.RFC3339, m[1])
	require.NoError(t, err)
	require.WithinRange(t, end, l.Expires.Add(-answered.Sub(asked)-time.Second), claimed.Add(time.Hour), "the lease's end reported")
	require.Contains(t, errOut, "-force")
	got, err := pg.store.Get(ctx, "default", "k-unknown")
	require.NoError(t, err)
	require.Equal(t, journal.StateUnknown, got.State, "refused resolve changed the record")
	require.Nil(t, got.Resolved)

	// The replica still holds its lease: it writes.
	_, err = pg.store.Update(journal.WithLease(ctx, l), "default", "k-unknown", func(r *journal.Record) error {
		r.Review = "still looking"
		return nil
	})
	require.NoError(t, err, "the replica's write before the take-over")

	out, errOut, code = runIdem(t, pg.args(append(resolve, "--force")...)...)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "resolved operation k-unknown in scope default: unknown -> succeeded\n")
	got, err = pg.store.Get(ctx, "default", "k-unknown")
	require.NoError(t, err)
	require.Equal(t, journal.StateSucceeded, got.State)
	require.NotNil(t, got.Resolved)
	require.Equal(t, "alice", got.Resolved.By)

	// The stale driver's next write and renewal are refused.
	_, err = pg.store.Update(journal.WithLease(ctx, l), "default", "k-unknown", func(r *journal.Record) error {
		r.State = journal.StateFailed
		return nil
	})
	require.ErrorIs(t, err, journal.ErrLeaseLost)
	_, err = pg.store.Renew(ctx, l, expires.Add(time.Hour))
	require.ErrorIs(t, err, journal.ErrLeaseLost)
	got, err = pg.store.Get(ctx, "default", "k-unknown")
	require.NoError(t, err)
	require.Equal(t, journal.StateSucceeded, got.State, "the stale write went through")
}

// resolve on an operation nobody drives takes and gives up its own lease:
// once done, another owner's claim is not refused as leased.
func TestDSNResolveReleasesItsLease(t *testing.T) {
	pg, _ := seeded(t)
	ctx := context.Background()
	_, errOut, code := runIdem(t, pg.args("resolve", "-scope", "acct-2", "k-unknown", "-failed", "-reason", "never sent", "-by", "bob")...)
	require.Equal(t, 0, code, errOut)
	now := time.Now()
	_, _, err := pg.store.Claim(ctx, "acct-2", "k-unknown", "replica-1", now, now.Add(time.Minute))
	require.ErrorIs(t, err, journal.ErrTerminal)

	// An expired lease is no one's: resolve needs no -force. (Its length
	// is what counts: the journal judges leases by the database's clock.)
	_, _, err = pg.store.Claim(ctx, "default", "k-pending", "replica-1", now, now.Add(-time.Minute))
	require.NoError(t, err)
	_, errOut, code = runIdem(t, pg.args("resolve", "k-pending", "-failed", "-reason", "replica gone", "-by", "bob")...)
	require.Equal(t, 0, code, errOut)
}

// The commands that work on a bbolt file as a whole say that they need
// -journal, before connecting to anything.
func TestDSNFileOnlyCommands(t *testing.T) {
	for _, args := range [][]string{
		{"check"},
		{"compact", "-json"},
		{"prune", "-settled-before", "30d"},
		{"prune", "-settled-before", "30d", "-dry-run"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			out, errOut, code := runIdem(t, append([]string{"-dsn", "postgres://app:s3cr3t@127.0.0.1:1/app"}, args...)...)
			require.Equal(t, 2, code, out)
			require.Contains(t, errOut, "-journal mode")
			require.Contains(t, errOut, args[0])
			require.NotContains(t, errOut, "s3cr3t")
		})
	}
}

// A DSN that does not work is reported clearly, and its password never.
func TestDSNBadDSN(t *testing.T) {
	const pw = "s3cr3t-pw"
	tests := []struct {
		dsn  string
		code int
		want string
	}{
		{"postgres://app:" + pw + "@127.0.0.1:1/app?connect_timeout=5", 1, "-dsn"},          // nothing listens
		{"host=127.0.0.1 port=1 user=app password=" + pw + " connect_timeout=5", 1, "-dsn"}, // key=value form
		{"postgres://app:" + pw + "@127.0.0.1:99999/app", 2, "DSN not understood"},
		{"postgres://app:" + pw + "@[::1/app", 2, "DSN not understood"},
		{"port=" + pw, 2, "DSN not understood"},
	}
	for _, tt := range tests {
		for _, cmd := range [][]string{{"stats"}, {"list", "-review"}, {"show", "k"}, {"resolve", "k", "-failed", "-reason", "x"}} {
			out, errOut, code := runIdem(t, append([]string{"-dsn", tt.dsn}, cmd...)...)
			require.Equal(t, tt.code, code, "%s %v: %s", tt.dsn, cmd, errOut)
			require.Empty(t, out)
			require.Contains(t, errOut, tt.want, "%v", cmd)
			require.NotContains(t, errOut, pw, "%v", cmd)
		}
	}
}

// A schema that holds no journal, or is not a schema name, says so.
func TestDSNBadSchema(t *testing.T) {
	pg := newPG(t)
	_, errOut, code := runIdem(t, "-dsn", pg.dsn, "-schema", "no_such_journal", "stats")
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "-schema")
	require.Contains(t, errOut, "Migrate")
	_, errOut, code = runIdem(t, "-dsn", pg.dsn, "-schema", `x"; DROP TABLE y`, "list")
	require.Equal(t, 2, code)
	require.Contains(t, errOut, "schema")
}

// Hostile keys and scopes get an error, never a panic.
func TestDSNBadInput(t *testing.T) {
	pg, _ := seeded(t)
	long := strings.Repeat("k", 1<<16)
	for _, args := range [][]string{
		{"show", "k\x00nul"},
		{"show", "-scope", "", "k-unknown"},
		{"show", "-scope", "bad\xffutf8", "k"},
		{"show", long},
		{"show", "-json", "\xff\xfe"},
		{"resolve", "k\x00", "-failed", "-reason", "x"},
		{"resolve", long, "-succeeded", "-reason", "x", "-force"},
		{"list", "-state", "bogus"},
		{"stats", "extra"},
	} {
		out, errOut, code := runIdem(t, pg.args(args...)...)
		require.Contains(t, []int{1, 2}, code, "%q: %s%s", args, out, errOut)
		require.NotEmpty(t, errOut, "%q", args)
	}
	// A scope no record has matches none, as in file mode.
	out, errOut, code := runIdem(t, pg.args("list", "-scope", "\x00")...)
	require.Equal(t, 0, code, errOut)
	require.Empty(t, out)
	require.Equal(t, "idem: no operations match\n", errOut)
	got, err := pg.store.Get(context.Background(), "default", "k-unknown")
	require.NoError(t, err)
	require.Equal(t, journal.StateUnknown, got.State, "a refused resolve changed the record")
}

// idem -h lists -dsn and -schema beside cmd/idem's flags.
func TestDSNUsage(t *testing.T) {
	out, _, code := runIdem(t, "-h")
	require.Equal(t, 0, code)
	for _, want := range []string{"-journal PATH", "-url URL", "-dsn DSN", "-schema NAME"} {
		require.Contains(t, out, want)
	}
	out, _, code = runIdem(t, "resolve", "-h")
	require.Equal(t, 0, code)
	require.Contains(t, out, "-dsn")
}
