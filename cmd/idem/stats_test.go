package main

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestStats(t *testing.T) {
	f := newJournal(t)
	stdout, stderr, code := runIdem(t, "stats", "-journal", f.path)
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "journal "+f.path+" (")
	for _, re := range []string{
		`(?m)^  pending\s+1$`, `(?m)^  processing\s+1$`, `(?m)^  unknown\s+1$`,
		`(?m)^  succeeded\s+2$`, `(?m)^  failed\s+1$`, `(?m)^  open\s+3$`,
		`(?m)^  flagged for review\s+1$`, `(?m)^  total\s+6$`,
	} {
		require.Regexp(t, re, stdout)
	}

	stdout, stderr, code = runIdem(t, "stats", "-journal", f.path, "-json")
	require.Equal(t, 0, code, stderr)
	var got struct {
		ByState  map[string]int `json:"by_state"`
		Open     int            `json:"open"`
		Review   int            `json:"review"`
		Total    int            `json:"total"`
		FileSize int64          `json:"file_size"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &got), stdout)
	require.Equal(t, map[string]int{"pending": 1, "processing": 1, "unknown": 1, "succeeded": 2, "failed": 1}, got.ByState)
	require.Equal(t, 3, got.Open)
	require.Equal(t, 1, got.Review)
	require.Equal(t, 6, got.Total)
	fi, err := os.Stat(f.path)
	require.NoError(t, err)
	require.Equal(t, fi.Size(), got.FileSize)
}
