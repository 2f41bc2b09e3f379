package main

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// progress draws a live status line on stderr: redrawn in place with \r
// on a terminal, a plain line every few seconds otherwise.
type progress struct {
	w     io.Writer
	tty   bool
	cnt   *counters
	total int

	mu   sync.Mutex // guards name and serialises writes
	name string

	quit, done chan struct{}
	once       sync.Once
}

func newProgress(w io.Writer, on bool, cnt *counters, total int) *progress {
	p := &progress{w: w, tty: isTerminal(w), cnt: cnt, total: total, quit: make(chan struct{}), done: make(chan struct{})}
	if !on {
		p.w = nil
		close(p.done)
		return p
	}
	every := 5 * time.Second
	if p.tty {
		every = 100 * time.Millisecond
	}
	go p.loop(every)
	return p
}

func (p *progress) loop(every time.Duration) {
	defer close(p.done)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-p.quit:
			return
		case <-t.C:
			p.draw()
		}
	}
}

// phase names what the demo is doing now.
func (p *progress) phase(name string) {
	if p.w == nil {
		return
	}
	p.mu.Lock()
	p.name = name
	p.mu.Unlock()
	p.draw()
}

// note prints a message on its own line.
func (p *progress) note(msg string) {
	if p.w == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tty {
		fmt.Fprintf(p.w, "\r\x1b[K%s\n", msg)
		return
	}
	fmt.Fprintln(p.w, msg)
}

func (p *progress) draw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.cnt
	// Short enough for an 80-column terminal, or \r cannot redraw it.
	ok, failed := c.settledOK.Load(), c.settledFailed.Load()
	line := fmt.Sprintf("%-12s settled %d/%d  ok %d  failed %d  in flight %d  attempts %d",
		p.name, ok+failed, p.total, ok, failed, c.inFlight.Load(), c.attempts.Load())
	if p.tty {
		fmt.Fprintf(p.w, "\r\x1b[K%s", line)
		return
	}
	fmt.Fprintln(p.w, line)
}

// stop ends the progress line; later calls do nothing.
func (p *progress) stop() {
	p.once.Do(func() {
		if p.w == nil {
			return
		}
		close(p.quit)
		<-p.done
		p.draw()
		if p.tty {
			fmt.Fprintln(p.w)
		}
		p.w = nil
	})
}
