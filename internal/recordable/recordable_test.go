package recordable

import "testing"

func TestName(t *testing.T) {
	for _, c := range []struct {
		s    string
		want bool
	}{
		{"evt_1MqqbK", true},
		{"alice (said bob)", true},
		{"Zoë", true},
		{"", true},
		{"evt\n2026-12-05 INFO forged", false},
		{"a\x00b", false},
		{"tab\there", false},
		{"\xff\xfe", false},
		{"del\x7f", false},
	} {
		if got := Name(c.s); got != c.want {
			t.Errorf("Name(%q) = %v; want %v", c.s, got, c.want)
		}
	}
}
