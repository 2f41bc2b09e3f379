package idem

import "sync"

// The default client-wide retry budget, in the manner of gRPC's retry
// throttling: every failed attempt costs a token, every success earns back
// a fraction of one, and retries stop while the bucket is at or below half.
const (
	DefaultRetryTokens     = 100.0
	DefaultRetryTokenRatio = 0.1
)

// retryBudget stops a fleet of clients from multiplying load on a struggling
// server. First attempts never consult it. The zero value allows everything.
type retryBudget struct {
	mu     sync.Mutex
	tokens float64
	max    float64 // 0 disables the budget
	ratio  float64
}

func newRetryBudget(maxTokens, ratio float64) *retryBudget {
	return &retryBudget{tokens: maxTokens, max: maxTokens, ratio: ratio}
}

// allowRetry reports whether a retry may go now.
func (b *retryBudget) allowRetry() bool {
	if b.max == 0 {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tokens > b.max/2
}

// failure records an attempt that did not settle the operation.
func (b *retryBudget) failure() {
	if b.max == 0 {
		return
	}
	b.mu.Lock()
	b.tokens = max(0, b.tokens-1)
	b.mu.Unlock()
}

// success records an attempt that got a conclusive answer.
func (b *retryBudget) success() {
	if b.max == 0 {
		return
	}
	b.mu.Lock()
	b.tokens = min(b.max, b.tokens+b.ratio)
	b.mu.Unlock()
}

// level returns the tokens held and the bucket's size.
func (b *retryBudget) level() (tokens, size float64) {
	if b.max == 0 {
		return 0, 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.tokens, b.max
}
