package icinga2

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"nsca_fast/stages/emit/sink"
)

// retryWait is the back-off before retry i (0 for the first).
func retryWait(i int) time.Duration {
	d := icingaFirstBackoff
	for ; i > 0 && d < icingaMaxBackoff; i-- {
		d *= 2
	}
	return min(d, icingaMaxBackoff)
}

// itemState is what became of one item of a batch.
type itemState struct {
	done     bool // delivered or rejected: consumed
	rejected bool
	status   int // rejected: the HTTP status (0: refused without sending)
	reason   string
}

// failure is why a request did not deliver its result.
type failure struct {
	err error
	// object: Icinga answered for the object (a 5xx in a per-object
	// result): other objects may still be fine. Otherwise the API as a
	// whole failed (connection, TLS, authentication, proxy error), and
	// the batch stops.
	object bool
	// final: retrying cannot help (the API's certificate does not verify).
	final bool
}

// batch is the shared state of one Write.
type batch struct {
	ctx     context.Context // ends at the batch's deadline
	stop    chan struct{}   // closed when the API failed: start nothing new
	once    sync.Once
	mu      sync.Mutex
	err     error // the first failure that left items undelivered
	apiDown bool  // a failure of the API as a whole
}

func (b *batch) fail(err error, apiDown bool) {
	b.mu.Lock()
	if b.err == nil {
		b.err = err
	}
	b.apiDown = b.apiDown || apiDown
	b.mu.Unlock()
	if apiDown {
		b.once.Do(func() { close(b.stop) })
	}
}

func (b *batch) stopped() bool {
	select {
	case <-b.stop:
		return true
	default:
		return b.ctx.Err() != nil
	}
}

// Write posts items, up to MaxInFlight at once. Results for one object
// (host, or host and service) are posted one after the other in their
// order, and once one of them could not be delivered the later ones are
// not sent either, so Icinga never sees them out of order.
//
// Write reorders items in place: on return items[:n] are the items
// consumed, delivered or rejected for good (reported through Rejected),
// and items[n:] the items to hand to the fallback, each part in the
// original order. err says why items[n:] were not delivered.
//
// A request that fails for a passing reason (connection, timeout, 5xx,
// 401, an ApiUser lacking the permission) is retried; once its retries are
// used up the API is taken as down: no further request is started, and
// for a while after, Write returns errBackoff at once. A result whose
// request Icinga received but whose answer was lost may be posted again, or
// also handed to the fallback: delivery is at least once. Write returns
// within (Retries+1) times Timeout plus the retries' back-off.
func (s *Icinga) Write(items []sink.Item) (int, error) {
	if len(items) == 0 {
		return 0, nil
	}
	err := s.deliver(items)
	n := s.partition(items)
	if n == len(items) {
		return n, nil
	}
	return n, err
}

// WriteMarked is Write without the reordering, for the durable queue,
// which can acknowledge only the delivered prefix of what it peeked:
// consumed[i] tells whether items[i] was consumed.
func (s *Icinga) WriteMarked(items []sink.Item, consumed []bool) error {
	err := s.deliver(items)
	for i := range items {
		consumed[i] = s.state[i].done
	}
	return err
}

// deliver posts items, leaving in s.state what became of each, and
// returns why those not consumed were not.
func (s *Icinga) deliver(items []sink.Item) error {
	if cap(s.state) < len(items) {
		s.state = make([]itemState, len(items))
	} else {
		s.state = s.state[:len(items)]
		clear(s.state)
	}
	if left := s.down.Left(); left > 0 {
		return fmt.Errorf("%w for %v: %v", errBackoff, left.Round(time.Millisecond), s.downErr)
	}
	lanes := s.lanes(items)

	ctx, cancel := context.WithTimeout(context.Background(), s.batchLimit)
	defer cancel()
	b := &batch{ctx: ctx, stop: make(chan struct{})}
	work := make(chan []int, len(lanes))
	for _, l := range lanes {
		work <- l
	}
	close(work)
	var wg sync.WaitGroup
	for range min(s.cfg.MaxInFlight, len(lanes)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for lane := range work {
				s.postLane(b, items, lane)
			}
		}()
	}
	wg.Wait()

	if b.err == nil && ctx.Err() != nil {
		b.err = fmt.Errorf("%w: the batch took longer than %v", errUnavailable, s.batchLimit)
	}
	if b.apiDown {
		s.down.Failed()
		s.downErr = b.err
	} else {
		s.down.Succeeded()
	}
	for i, st := range s.state {
		if st.rejected {
			s.rejected(items[i], st.status, st.reason)
		}
	}
	return b.err
}

// lanes groups the indexes of items by object, each lane in batch order.
func (s *Icinga) lanes(items []sink.Item) [][]int {
	type object struct{ host, service string }
	index := make(map[object]int, len(items))
	var lanes [][]int
	for i, it := range items {
		k := object{it.Result.Host, it.Result.Service}
		l, ok := index[k]
		if !ok {
			l = len(lanes)
			index[k] = l
			lanes = append(lanes, nil)
		}
		lanes[l] = append(lanes[l], i)
	}
	return lanes
}

// postLane posts the items of one object in order, stopping at the first
// that could not be delivered.
func (s *Icinga) postLane(b *batch, items []sink.Item, lane []int) {
	for _, i := range lane {
		if b.stopped() {
			return
		}
		r := items[i].Result
		if strings.Contains(r.Host, "!") || strings.Contains(r.Service, "!") {
			s.state[i] = itemState{done: true, rejected: true, reason: "object names cannot contain '!'"}
			continue
		}
		status, reason, f := s.post(b, items[i])
		if f != nil {
			if f.object {
				b.fail(fmt.Errorf("%s: %w", objectName(r), f.err), false)
			} else {
				b.fail(f.err, true)
			}
			return
		}
		s.state[i] = itemState{done: true, rejected: status < 200 || status > 299, status: status, reason: reason}
	}
}

// post sends one result with its retries. It returns the status with which
// Icinga consumed the result (200, or the rejection's status and reason),
// or why it was not delivered.
func (s *Icinga) post(b *batch, it sink.Item) (int, string, *failure) {
	body := requestBody(it, s.source)
	for attempt := 0; ; attempt++ {
		status, reason, f := s.attempt(b.ctx, body)
		if f == nil {
			return status, reason, nil
		}
		if f.final || attempt >= s.retries || b.ctx.Err() != nil {
			return 0, "", f
		}
		select {
		case <-time.After(retryWait(attempt)):
		case <-b.stop:
			return 0, "", f
		case <-b.ctx.Done():
			return 0, "", f
		}
	}
}

// icingaAnswer is what Icinga answers: per-object results, or an error
// for the request as a whole.
type icingaAnswer struct {
	Results []struct {
		Code   float64 `json:"code"`
		Status string  `json:"status"`
	} `json:"results"`
	Error      float64 `json:"error"`
	Status     string  `json:"status"`
	Diagnostic string  `json:"diagnostic_information"`
}

// attempt sends one request and classifies the answer.
func (s *Icinga) attempt(ctx context.Context, body []byte) (int, string, *failure) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.endpoint, bytes.NewReader(body))
	if err != nil {
		return 0, "", &failure{err: fmt.Errorf("%w: %v", errUnavailable, err), final: true}
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "nsca_fast")
	if s.cfg.User != "" {
		req.SetBasicAuth(s.cfg.User, s.cfg.Password)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		var verify *tls.CertificateVerificationError
		return 0, "", &failure{err: fmt.Errorf("%w: %v", errUnavailable, err), final: errors.As(err, &verify)}
	}
	data, _ := io.ReadAll(io.LimitReader(resp.Body, icingaMaxBody))
	// Drain what is left so the connection can be kept alive.
	io.Copy(io.Discard, io.LimitReader(resp.Body, icingaMaxBody))
	resp.Body.Close()
	return classify(resp.StatusCode, data)
}

// classify maps Icinga's answer to an outcome: 2xx delivered; a refusal of
// the result itself (400, 404 unknown object, a 4xx in a per-object result
// such as 403 passive checks disabled) consumed for good; anything else a
// failure to retry.
func classify(code int, data []byte) (int, string, *failure) {
	var a icingaAnswer
	parsed := json.Unmarshal(data, &a) == nil
	reason := strings.TrimSpace(a.Status)
	perObject := parsed && len(a.Results) > 0
	if perObject {
		reason = strings.TrimSpace(a.Results[0].Status)
	}
	if reason == "" {
		reason = http.StatusText(code)
	}
	what := fmt.Sprintf("%d %s", code, reason)
	switch {
	case code >= 200 && code < 300:
		return code, "", nil
	case code == http.StatusNotFound && strings.Contains(a.Diagnostic, "Missing permission"):
		// Icinga answers 404 when the ApiUser may not run the action.
		perm := strings.TrimSpace(strings.TrimPrefix(strings.SplitN(a.Diagnostic, "\n", 2)[0], "Error: "))
		return 0, "", &failure{err: fmt.Errorf("%w: %s (%s)", errAuth, what, perm)}
	case code == http.StatusBadRequest || code == http.StatusNotFound:
		return code, reason, nil
	case code >= 400 && code < 500 && perObject:
		return code, reason, nil
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return 0, "", &failure{err: fmt.Errorf("%w: %s", errAuth, what)}
	case code >= 500 && perObject:
		return 0, "", &failure{err: fmt.Errorf("%w: %s", errUnavailable, what), object: true}
	}
	return 0, "", &failure{err: fmt.Errorf("%w: %s", errUnavailable, what)}
}

// partition moves the consumed items to the front, keeping the order
// within both parts, and returns how many there are.
func (s *Icinga) partition(items []sink.Item) int {
	s.sorted = s.sorted[:0]
	for i, it := range items {
		if s.state[i].done {
			s.sorted = append(s.sorted, it)
		}
	}
	n := len(s.sorted)
	for i, it := range items {
		if !s.state[i].done {
			s.sorted = append(s.sorted, it)
		}
	}
	copy(items, s.sorted)
	clear(s.sorted) // drop the references to outputs
	return n
}
