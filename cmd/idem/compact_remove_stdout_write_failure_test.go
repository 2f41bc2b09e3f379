package main

import (
	"bytes"
	"io"
	"regexp"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/cli/clitest"
)

// compact's sizes and key-ignoring remove's confirmation, unprinted
// (stdout on a full disk, a reader gone), were said on stderr only as
// "printing the output failed": the operator could not tell whether the
// journal was swapped or the endpoint forgotten, and might run it again
// or take the endpoint for still kept. Each now says what it did and that
// it is in the journal, as resolve does, with exit status 1.
func TestCompactAndRemoveStdoutWriteFailureSayWhatWasDone(t *testing.T) {
	for _, tc := range []struct {
		stdout io.Writer
		errno  syscall.Errno
	}{{clitest.FullDisk{}, syscall.ENOSPC}, {clitest.ReaderGone{}, syscall.EPIPE}} {
		failed := ", but printing it failed: " + tc.errno.Error() + "\n"
		unprinted := func(args ...string) string {
			t.Helper()
			var stderr bytes.Buffer
			code := run(args, tc.stdout, &stderr)
			require.Equal(t, 1, code, "%q: %s", args, stderr.String())
			return stderr.String()
		}

		f := newJournal(t)
		for _, args := range [][]string{{"compact", "-journal", f.path}, {"compact", "-json", "-journal", f.path}} {
			require.Regexp(t, `^idem: journal `+regexp.QuoteMeta(f.path)+` compacted: [0-9.]+ [KMG]?i?B -> [0-9.]+ [KMG]?i?B; the compacted journal is in place`+
				regexp.QuoteMeta(failed)+`$`, unprinted(args...), "%q", args)
		}
		out, errOut, code := runIdem(t, "check", "-journal", f.path)
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, ": ok (6 records,")

		keepEndpoints(t, f.path, chargeEndpoint, refundEndpoint)
		served := newJournal(t)
		keepEndpoints(t, served.path, chargeEndpoint, refundEndpoint)
		url := serveJournal(t, served.path)
		for _, tc := range []struct {
			mode []string
			json []string
			want string
		}{
			{[]string{"-journal", f.path}, nil, `removed ` + chargeEndpoint + ` (flagged 0 open operation(s) to it "key ignored")`},
			{[]string{"-journal", f.path}, []string{"-json"}, `removed ` + refundEndpoint + ` (flagged 0 open operation(s) to it "key ignored")`},
			{[]string{"-url", url}, nil, `removed ` + chargeEndpoint},
			{[]string{"-url", url}, []string{"-json"}, `removed ` + refundEndpoint},
		} {
			endpoint := chargeEndpoint
			if tc.json != nil {
				endpoint = refundEndpoint
			}
			args := append(append(append(append([]string{}, tc.mode...), "key-ignoring", "remove"), tc.json...), endpoint)
			require.Equal(t, "idem: "+tc.want+"; the removal is journaled"+failed, unprinted(args...), "%q", args)
		}
		for _, mode := range [][]string{{"-journal", f.path}, {"-url", url}} {
			out, errOut, code := runIdem(t, append(mode, "key-ignoring", "-json")...)
			require.Equal(t, 0, code, errOut)
			require.Equal(t, "{\n  \"endpoints\": []\n}\n", out, "%q: both removed", mode)
		}
	}
}
