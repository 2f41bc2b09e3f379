package pgjournal_test

import (
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/pgjournal"
)

// A stallProxy is a TCP proxy on 127.0.0.1 in front of the test server
// that, on command, stops forwarding in both directions without closing
// anything: the database's host gone, its packets dropped, no reset. No
// client-side deadline of the server's own (statement_timeout) can help,
// and the bytes sent meanwhile arrive once it forwards again, as TCP's
// retransmissions would deliver them.
type stallProxy struct {
	ln            net.Listener
	upNet, upAddr string
	done          chan struct{}
	wg            sync.WaitGroup
	mu            sync.Mutex
	gate          chan struct{} // new connections': closed while they forward
	links         []*link
	accepted      int
}

// A link is one proxied connection; its gate is closed while it forwards.
type link struct {
	gate       chan struct{}
	down, up   net.Conn
	closeOnce  sync.Once
	closeLinks func()
}

// newStallProxy starts a proxy to the test server, forwarding; cleanup
// stops it and closes its connections.
func newStallProxy(t testing.TB) *stallProxy {
	t.Helper()
	cfg, err := pgconn.ParseConfig(dsn(t))
	require.NoError(t, err)
	p := &stallProxy{done: make(chan struct{}), gate: closedGate()}
	if strings.HasPrefix(cfg.Host, "/") {
		p.upNet, p.upAddr = "unix", filepath.Join(cfg.Host, fmt.Sprintf(".s.PGSQL.%d", cfg.Port))
	} else {
		p.upNet, p.upAddr = "tcp", net.JoinHostPort(cfg.Host, strconv.Itoa(int(cfg.Port)))
	}
	p.ln, err = net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func closedGate() chan struct{} {
	g := make(chan struct{})
	close(g)
	return g
}

func isOpen(g chan struct{}) bool {
	select {
	case <-g:
		return true
	default:
		return false
	}
}

func (p *stallProxy) accept() {
	defer p.wg.Done()
	for {
		down, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial(p.upNet, p.upAddr)
		if err != nil {
			_ = down.Close()
			continue
		}
		p.mu.Lock()
		l := &link{gate: p.gate, down: down, up: up}
		l.closeLinks = func() { l.closeOnce.Do(func() { _ = l.down.Close(); _ = l.up.Close() }) }
		p.links = append(p.links, l)
		p.accepted++
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pump(l, down, up)
		go p.pump(l, up, down)
	}
}

// pump copies src to dst, holding what it read while l is stalled.
func (p *stallProxy) pump(l *link, src, dst net.Conn) {
	defer p.wg.Done()
	defer l.closeLinks()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !p.pass(l) {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// pass waits until l forwards; false when the proxy is closed.
func (p *stallProxy) pass(l *link) bool {
	for {
		p.mu.Lock()
		g := l.gate
		p.mu.Unlock()
		select {
		case <-g:
			// Stalled again meanwhile? Then wait on the new gate.
			p.mu.Lock()
			same := l.gate == g
			p.mu.Unlock()
			if same {
				return true
			}
		case <-p.done:
			return false
		}
	}
}

// stall stops forwarding on every connection open now, and on those
// opened later too when newToo is set (the host is gone); with newToo
// unset, only the connections open now are wedged (a path through a
// failed router, a NAT entry lost), and new ones work.
func (p *stallProxy) stall(newToo bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.links {
		if isOpen(l.gate) {
			l.gate = make(chan struct{})
		}
	}
	if newToo && isOpen(p.gate) {
		p.gate = make(chan struct{})
	}
}

// resume forwards again on every connection, what was held first.
func (p *stallProxy) resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, l := range p.links {
		if !isOpen(l.gate) {
			close(l.gate)
		}
	}
	if !isOpen(p.gate) {
		close(p.gate)
	}
}

// connections is how many connections the proxy has accepted.
func (p *stallProxy) connections() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

func (p *stallProxy) close() {
	close(p.done)
	_ = p.ln.Close()
	p.mu.Lock()
	for _, l := range p.links {
		l.closeLinks()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// openStoreVia opens a Store on a fresh schema whose pool reaches the
// test server through p; cfg, when not nil, changes the pool's
// configuration further.
func openStoreVia(t testing.TB, p *stallProxy, cfg func(*pgxpool.Config), opts ...pgjournal.Option) *pgjournal.Store {
	t.Helper()
	port := p.ln.Addr().(*net.TCPAddr).Port
	s := openStoreWith(t, func(pc *pgxpool.Config) {
		pc.ConnConfig.Host, pc.ConnConfig.Port, pc.ConnConfig.Fallbacks = "127.0.0.1", uint16(port), nil
		if cfg != nil {
			cfg(pc)
		}
	}, opts...)
	// First of the cleanups: closing the pool waits for pgx to close the
	// stalled connections, each up to 15 s unless it hears the server.
	t.Cleanup(p.resume)
	return s
}
