package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"
)

// A wait the Client gave up, as ForgetKeyIgnoring's for an endpoint still
// being journaled after 10 s ("nothing was removed: try again", matching
// context.DeadlineExceeded), or a request that ended, did nothing and may
// be tried again: a 503, not a 500 "internal" that tells an operator the
// handler is broken.
func TestWaitGivenUpIsUnavailable(t *testing.T) {
	for _, err := range []error{
		fmt.Errorf("idem: forget an endpoint ignoring the key: idem: an endpoint learnt to ignore the key is still being journaled; nothing was removed: try again: %w", context.DeadlineExceeded),
		fmt.Errorf("idem: forget an endpoint ignoring the key: %w", context.Canceled),
	} {
		var e *Error
		require.True(t, errors.As(clientError(err), &e))
		require.Equal(t, http.StatusServiceUnavailable, e.Status, "%v", err)
		require.Equal(t, "unavailable", e.Code)
	}
	var e *Error
	require.True(t, errors.As(clientError(errors.New("disk on fire")), &e))
	require.Equal(t, http.StatusInternalServerError, e.Status, "any other error")
}
