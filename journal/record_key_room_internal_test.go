package journal

import (
	"bytes"
	"strings"
	"testing"
)

// A create's or an update's record key is written into the room its
// write keeps when it fits, and allocated as ever when it does not: the
// same bytes either way.
func TestRecordKeyIn(t *testing.T) {
	for _, tt := range []struct{ scope, key string }{
		{"default", "0193a5c2-7f4e-7b21-9a3d-5c6e7f809112"},
		{"s", strings.Repeat("k", rkRoom-2)}, // exactly the room
		{"s", strings.Repeat("k", rkRoom-1)}, // a byte over
		{strings.Repeat("s", 100), strings.Repeat("k", 200)},
	} {
		var room [rkRoom]byte
		got := recordKeyIn(&room, tt.scope, tt.key)
		if want := recordKey(tt.scope, tt.key); !bytes.Equal(got, want) {
			t.Errorf("recordKeyIn(%q, %q) = %q; want %q", tt.scope, tt.key, got, want)
		}
		inRoom := &got[0] == &room[0]
		if fits := len(tt.scope)+1+len(tt.key) <= rkRoom; inRoom != fits {
			t.Errorf("recordKeyIn(%d+1+%d bytes) in the room = %v; want %v", len(tt.scope), len(tt.key), inRoom, fits)
		}
	}
}
