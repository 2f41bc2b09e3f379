package idem

import (
	"net/http"
	"testing"
)

// answerOf asks replayed, keyIgnored and fromCache only when markedAnswer
// says the header holds a name one of them reads. Every such name, with a
// value that makes its reader speak, must pass the gate and be read as
// before: a name missed here is a replay taken for a first answer, or a
// cache's answer taken for ours.
func TestMarkedAnswerPassesEveryNameRead(t *testing.T) {
	var names []string
	names = append(names, replayMarkers[:]...)
	names = append(names, statusMarkers[:]...)
	names = append(names, cacheMarkers[:]...)
	names = append(names, worldlineReplayed, "Age", "Cache-Status")
	values := []string{"true", `"true"`, "?1", "replayed", "ignored", "12", "HIT", "hit", "Hit from cloudfront", "ExampleCache; hit", "2024-01-02T03:04:05Z"}
	for _, name := range names {
		spoke := false
		for _, v := range values {
			h := http.Header{"Content-Type": {"application/json"}, name: {v}}
			if !markedAnswer(h) {
				t.Fatalf("markedAnswer(%s: %q) = false; want true", name, v)
			}
			spoke = spoke || replayed(h, http.StatusCreated) || keyIgnored(h) || fromCache(h) != ""
		}
		if !spoke {
			t.Errorf("%s: no value made replayed, keyIgnored or fromCache speak; the test's values miss it", name)
		}
	}
}

func TestMarkedAnswerUnmarked(t *testing.T) {
	for _, h := range []http.Header{
		nil,
		{},
		{"Content-Type": {"application/json"}, "Content-Length": {"52"}},
		// Spellings no reader looks up: a header map's keys are canonical
		// when net/http builds it, and the readers index it as such.
		{"idempotent-replayed": {"true"}, "X-Idempotent-Replayed-At": {"true"}, "Date": {"Mon, 02 Jan 2006 15:04:05 GMT"}},
	} {
		if markedAnswer(h) {
			t.Errorf("markedAnswer(%v) = true; want false", h)
		}
		if replayed(h, http.StatusCreated) || keyIgnored(h) || fromCache(h) != "" {
			t.Errorf("%v: a reader speaks where markedAnswer says it would not", h)
		}
	}
}
