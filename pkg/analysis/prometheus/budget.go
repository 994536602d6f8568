package prometheus

import (
	"context"
	"fmt"
	"io"
	"sync"
)

// DefaultBudget is the manager's memory for answers being read, when the
// operator sets none. An honest answer (one number) costs a few KiB of it;
// an answer at MaxResponseBytes costs CostPerByte times that, 12 MiB, so
// two such answers are read at once while a quarter of the budget stays
// for the first bytes of every other answer. The manager reading answers
// at the cap for sixteen Rollouts of ten metrics stays under 256 MiB
// resident (test/integration/rollout TestAnalysisMemoryStaysUnder256MiB),
// half the container's default limit.
const DefaultBudget = 32 << 20

const (
	// CostPerByte is what one byte read of an answer may cost in memory
	// until the query returns: the JSON decoder's buffer, which holds what
	// it read and may grow to twice that, plus the one value decoded from
	// it (a label value, an error text). Series are counted as they stream
	// by, never kept, so this holds for an answer of any shape.
	CostPerByte = 3
	// firstBytes of every answer may wait for room in the budget, as long
	// as its query may last: an honest answer is far smaller, so it is read
	// as soon as room is freed. Past firstBytes, an answer grows only while
	// a quarter of the budget stays free, and fails at once otherwise:
	// large answers never wait holding memory, so they cannot all hold
	// part of the budget and wait for each other, and they cannot take the
	// room small answers need.
	firstBytes = 64 << 10
	// readChunk bounds one read of an answer, so that what is reserved
	// before a read is never far more than what the read brings.
	readChunk = 32 << 10
)

// Budget bounds the memory that answers take while they are read and
// decoded, across every Provider that shares it: one per manager, so that
// the bound holds whatever the number of Rollouts, metrics and workers.
// Bytes are reserved before they are read and released when the query
// returns. A nil *Budget bounds nothing but MaxResponseBytes per answer.
type Budget struct {
	limit int64

	mu         sync.Mutex
	used, peak int64
	waiters    int
	// freed is closed, and replaced, when bytes are released while
	// answers wait for room.
	freed chan struct{}
}

// NewBudget returns a budget of limit bytes; DefaultBudget when limit is
// not positive.
func NewBudget(limit int64) *Budget {
	if limit <= 0 {
		limit = DefaultBudget
	}
	return &Budget{limit: limit, freed: make(chan struct{})}
}

// Limit is the budget's size in bytes.
func (b *Budget) Limit() int64 {
	if b == nil {
		return 0
	}
	return b.limit
}

// InUse is the bytes reserved now, for the manager's metric.
func (b *Budget) InUse() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// Peak is the most bytes ever reserved at once; never above Limit.
func (b *Budget) Peak() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.peak
}

// BudgetError is an answer not read in full because the budget had no
// room for it.
type BudgetError struct {
	Limit int64
	// Waited is set when the answer's first bytes waited for room until
	// the query's time ran out; unset when a large answer could not grow.
	Waited bool
}

func (e *BudgetError) Error() string {
	if e.Waited {
		return fmt.Sprintf("the answer was not read: the manager's memory for reading analysis answers (%d MiB, shared by every Rollout) stayed in use by other answers for as long as the query could last", e.Limit>>20)
	}
	return fmt.Sprintf("the answer was not read in full: it outgrew what the manager's memory for reading analysis answers (%d MiB, shared by every Rollout) had left; a query for one number needs a few KiB", e.Limit>>20)
}

// reserve takes n bytes: from the whole budget, waiting for room until
// ctx ends, when mayWait; otherwise at once, leaving a quarter free.
func (b *Budget) reserve(ctx context.Context, n int64, mayWait bool) error {
	ceiling := b.limit
	if !mayWait {
		ceiling -= b.limit / 4
	}
	b.mu.Lock()
	for b.used+n > ceiling {
		if !mayWait || n > ceiling {
			b.mu.Unlock()
			return &BudgetError{Limit: b.limit}
		}
		freed := b.freed
		b.waiters++
		b.mu.Unlock()
		select {
		case <-ctx.Done():
			b.mu.Lock()
			b.waiters--
			b.mu.Unlock()
			return &BudgetError{Limit: b.limit, Waited: true}
		case <-freed:
		}
		b.mu.Lock()
		b.waiters--
	}
	b.used += n
	b.peak = max(b.peak, b.used)
	b.mu.Unlock()
	return nil
}

func (b *Budget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	if b.waiters > 0 {
		close(b.freed)
		b.freed = make(chan struct{})
	}
}

// charge is one query's share of a budget: what its answers hold until the
// query returns. It is used by one goroutine at a time.
type charge struct {
	b *Budget
	// held is reserved in b; read is what the query's answers brought so
	// far, which says whether a read is among the first bytes.
	held, read int64
}

func (b *Budget) newCharge() *charge {
	if b == nil {
		return nil
	}
	return &charge{b: b}
}

// close releases everything the query held.
func (c *charge) close() {
	if c == nil {
		return
	}
	c.b.release(c.held)
	c.held = 0
}

// meter reads body under c: each read is reserved first, CostPerByte per
// byte asked for, and what the read did not bring is given back at once.
func (c *charge) meter(ctx context.Context, body io.Reader) io.Reader {
	if c == nil {
		return body
	}
	return &meteredReader{ctx: ctx, body: body, c: c}
}

type meteredReader struct {
	ctx  context.Context
	body io.Reader
	c    *charge
}

func (m *meteredReader) Read(p []byte) (int, error) {
	if len(p) > readChunk {
		p = p[:readChunk]
	}
	c := m.c
	want := int64(len(p)) * CostPerByte
	if err := c.b.reserve(m.ctx, want, c.read+int64(len(p)) <= firstBytes); err != nil {
		return 0, err
	}
	n, err := m.body.Read(p)
	c.read += int64(n)
	c.held += int64(n) * CostPerByte
	c.b.release(want - int64(n)*CostPerByte)
	return n, err
}
