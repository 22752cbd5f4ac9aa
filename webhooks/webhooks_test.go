package webhooks_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
	"github.com/eimhq/eim/seal"
	"github.com/eimhq/eim/sqlstore"
	"github.com/eimhq/eim/sqlstore/storetest"
	"github.com/eimhq/eim/webhooks"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "webhooks tests: leaked goroutines:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// engines runs f on SQLite and, when EIM_TEST_POSTGRES_URL is set, on a
// fresh PostgreSQL database.
func engines(t *testing.T, f func(t *testing.T, dsn string)) {
	t.Run("sqlite", func(t *testing.T) { f(t, filepath.Join(t.TempDir(), "eim.db")) })
	t.Run("postgres", func(t *testing.T) { f(t, storetest.PostgresURL(t)) })
}

// receiver is a real HTTP receiver on 127.0.0.1 that records what it
// acknowledged.
type receiver struct {
	t      *testing.T
	srv    *httptest.Server
	secret string
	// fail answers 500 to that many requests first; hang never answers
	// (until the test ends).
	fail int
	hang bool

	mu       sync.Mutex
	requests int
	acked    []delivered
	sigErrs  []string
	release  chan struct{}
}

type delivered struct {
	eventID, deliveryID, eventType, resourceID string
	body                                       string
}

func newReceiver(t *testing.T, secret string, fail int, hang bool) *receiver {
	r := &receiver{t: t, secret: secret, fail: fail, hang: hang, release: make(chan struct{})}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	t.Cleanup(func() {
		close(r.release)
		r.srv.Close()
	})
	return r
}

func (r *receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.requests++
	n := r.requests
	r.mu.Unlock()
	if r.hang {
		select {
		case <-r.release:
		case <-req.Context().Done():
		}
		return
	}
	if n <= r.fail {
		http.Error(w, "not yet", http.StatusInternalServerError)
		return
	}
	// The documented scheme, computed here from scratch: hex HMAC-SHA256
	// of "<t>.<body>" with the secret.
	sig := req.Header.Get("EIM-Signature")
	if err := verifyDocumented(r.secret, sig, body); err != nil {
		r.mu.Lock()
		r.sigErrs = append(r.sigErrs, err.Error())
		r.mu.Unlock()
	}
	if err := eim.VerifySignature(r.secret, sig, body, time.Now(), 5*time.Minute); err != nil {
		r.mu.Lock()
		r.sigErrs = append(r.sigErrs, "VerifySignature: "+err.Error())
		r.mu.Unlock()
	}
	var p webhooks.Payload
	if err := json.Unmarshal(body, &p); err != nil || p.ID != req.Header.Get(webhooks.HeaderEventID) || p.Type != req.Header.Get(webhooks.HeaderEventType) {
		r.mu.Lock()
		r.sigErrs = append(r.sigErrs, fmt.Sprintf("body %s does not match its headers (%v)", body, err))
		r.mu.Unlock()
	}
	r.mu.Lock()
	r.acked = append(r.acked, delivered{p.ID, req.Header.Get(webhooks.HeaderDeliveryID), p.Type, p.ResourceID, string(body)})
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

func verifyDocumented(secret, header string, body []byte) error {
	var ts, v1 string
	for _, part := range strings.Split(header, ",") {
		if v, ok := strings.CutPrefix(part, "t="); ok {
			ts = v
		}
		if v, ok := strings.CutPrefix(part, "v1="); ok {
			v1 = v
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || time.Since(time.Unix(sec, 0)).Abs() > time.Minute {
		return fmt.Errorf("signature header %q: bad or stale t", header)
	}
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(ts + "." + string(body)))
	if want := hex.EncodeToString(m.Sum(nil)); !hmac.Equal([]byte(want), []byte(v1)) {
		return fmt.Errorf("signature header %q: v1 is not HMAC-SHA256(secret, t.body) = %s", header, want)
	}
	return nil
}

func (r *receiver) got() ([]delivered, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.acked), slices.Clone(r.sigErrs)
}

func (r *receiver) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestDeliveries: events of real changes reach real receivers, signed as
// documented, at least once and in order per resource; a receiver that
// fails is retried until it recovers, one that hangs or is down delays
// neither the others nor the writes, and one that stays down is given up.
func TestDeliveries(t *testing.T) {
	engines(t, func(t *testing.T, dsn string) {
		ctx, cancel := context.WithCancel(t.Context())
		const p = "acme"
		st := openProject(t, ctx, dsn, p, "2a9d3c9e-8c4f-4d5e-9a6b-000000000001")
		inv := inventory.New(st, inventory.Options{})
		const timeout = 2 * time.Second
		svc := webhooks.New(webhooks.Options{Store: st, Timeout: timeout, Poll: 50 * time.Millisecond,
			MinBackoff: 100 * time.Millisecond, MaxBackoff: 400 * time.Millisecond, MaxAge: 6 * time.Second})
		var wg sync.WaitGroup
		wg.Go(func() { _ = svc.Follow(ctx) })
		wg.Go(func() { _ = svc.Deliver(ctx) })
		defer func() { cancel(); wg.Wait() }()

		user := eim.WithActor(ctx, eim.UserActor("alice"))
		mod := eim.WithActor(ctx, eim.ModuleActor("host"))
		h1, h2 := &eim.Host{Name: "h1"}, &eim.Host{Name: "h2"}
		for _, h := range []*eim.Host{h1, h2} {
			if err := st.Update(user, p, func(tx eim.Tx) error { return tx.Create(user, h) }); err != nil {
				t.Fatal(err)
			}
		}
		setHost := func(h *eim.Host, fields ...string) time.Duration {
			t.Helper()
			start := time.Now()
			if err := st.Update(mod, p, func(tx eim.Tx) error { return tx.UpdateFields(mod, h, fields...) }); err != nil {
				t.Fatal(err)
			}
			return time.Since(start)
		}
		// Writes with no webhook, for comparison.
		var before []time.Duration
		for i := range 10 {
			h2.Note = fmt.Sprint("n", i)
			before = append(before, setHost(h2, "note"))
		}

		const secret = "0123456789abcdef0123"
		good := newReceiver(t, secret, 0, false)
		flaky := newReceiver(t, secret, 2, false)
		hang := newReceiver(t, secret, 0, true)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		downURL := "http://" + ln.Addr().String() + "/hook"
		ln.Close()
		types := []string{eim.EventHostOnboarded, eim.EventHostConnectionLost}
		hookOf := map[string]string{}
		for name, url := range map[string]string{"good": good.srv.URL + "/in", "flaky": flaky.srv.URL, "hang": hang.srv.URL, "down": downURL} {
			w, _, err := inv.CreateWebhook(user, p, inventory.WebhookInput{URL: url, EventTypes: types, Secret: secret})
			if err != nil {
				t.Fatalf("create webhook %s: %v", name, err)
			}
			hookOf[name] = w.ID
		}

		// host 1: onboarded, lost, back, lost again; host 2: onboarded.
		h1.CurrentState = eim.HostStateOnboarded
		setHost(h1, "currentState")
		h1.HostStatus = "No Connection"
		setHost(h1, "hostStatus")
		h2.CurrentState = eim.HostStateOnboarded
		setHost(h2, "currentState")
		// While the hanging receiver holds its deliveries, the writes take
		// no longer than without webhooks: never the receiver's timeout.
		eventually(t, 5*time.Second, "the hanging receiver is called", func() bool { return hang.count() > 0 })
		var during []time.Duration
		for i := range 10 {
			h2.Note = fmt.Sprint("m", i)
			during = append(during, setHost(h2, "note"))
		}
		// Back to "Running" and at once lost again: two transitions, both
		// seen (events come from the audit records, not from the state
		// the module finds).
		h1.HostStatus = "Running"
		setHost(h1, "hostStatus")
		h1.HostStatus = "No Connection"
		setHost(h1, "hostStatus")
		t.Logf("write latency: median %v, max %v without webhooks; median %v, max %v with a hanging receiver attached",
			median(before), slices.Max(before), median(during), slices.Max(during))
		if slices.Max(during) >= timeout {
			t.Errorf("a write took %v with a hanging receiver attached, want less than the delivery timeout %v (writes must not wait for receivers)", slices.Max(during), timeout)
		}

		wantH1 := []string{eim.EventHostOnboarded, eim.EventHostConnectionLost, eim.EventHostConnectionLost}
		check := func(name string, r *receiver) {
			t.Helper()
			eventually(t, 15*time.Second, name+" receiver acknowledges the 4 events", func() bool {
				got, _ := r.got()
				return len(got) >= 4
			})
			got, sigErrs := r.got()
			if len(sigErrs) > 0 {
				t.Errorf("%s: signature or body errors: %v", name, sigErrs)
			}
			var h1Types []string
			ids := map[string]bool{}
			for _, d := range got {
				if ids[d.eventID] {
					t.Errorf("%s: event %s acknowledged twice", name, d.eventID)
				}
				ids[d.eventID] = true
				if d.resourceID == h1.ResourceID {
					h1Types = append(h1Types, d.eventType)
				}
				if !strings.HasPrefix(d.deliveryID, d.eventID+"-") {
					t.Errorf("%s: delivery ID %s is not of event %s", name, d.deliveryID, d.eventID)
				}
			}
			if !slices.Equal(h1Types, wantH1) {
				t.Errorf("%s: host 1's events in the order acknowledged: got %v, want %v", name, h1Types, wantH1)
			}
			if len(got) != 4 {
				t.Errorf("%s: got %d events, want 4: %+v", name, len(got), got)
			}
		}
		check("good", good)
		check("flaky", flaky)
		if n := flaky.count(); n < 6 {
			t.Errorf("flaky receiver: %d requests, want the 2 refused and the 4 acknowledged", n)
		}
		// The last acknowledgement may reach the receiver's records before
		// the deliverer records it.
		var ds []*eim.Delivery
		eventually(t, 10*time.Second, "the flaky receiver's deliveries recorded delivered", func() bool {
			ds, _, err = inv.Deliveries(ctx, p, hookOf["flaky"], 100, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range ds {
				if d.State != eim.DeliveryDelivered {
					return false
				}
			}
			return len(ds) == 4
		})
		retried := false
		for _, d := range ds {
			if d.State != eim.DeliveryDelivered || d.LastStatus != http.StatusNoContent || d.LastError != "" {
				t.Errorf("flaky delivery %s: got %s, status %d, %q; want delivered, 204", d.ID, d.State, d.LastStatus, d.LastError)
			}
			retried = retried || d.Attempts > 1
		}
		if !retried {
			t.Errorf("flaky deliveries: none took more than one attempt: %+v", ds)
		}

		// The hanging receiver: attempts end at the timeout, are recorded
		// and retried; the dead one is given up after MaxAge.
		eventually(t, 15*time.Second, "the hanging receiver's delivery records a timeout", func() bool {
			ds, _, err := inv.Deliveries(ctx, p, hookOf["hang"], 100, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range ds {
				if d.Attempts > 0 && strings.Contains(d.LastError, "no answer within") && d.LastStatus == 0 {
					return true
				}
			}
			return false
		})
		eventually(t, 20*time.Second, "the dead receiver's first delivery is given up", func() bool {
			ds, _, err := inv.Deliveries(ctx, p, hookOf["down"], 100, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range ds {
				if d.State == eim.DeliveryFailed {
					// How many attempts fit in MaxAge depends on how soon the
					// first came (on a loaded machine, late); retries are the
					// flaky receiver's check above.
					if d.Attempts < 1 || d.LastError == "" || d.LastStatus != 0 || time.Since(d.CreatedAt.Time) < 5*time.Second {
						t.Errorf("given-up delivery: got %+v, want an attempt, an error, no status, given up once a next attempt would pass MaxAge (6 s)", d)
					}
					return true
				}
			}
			return false
		})
	})
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// TestCatchUp: what changed while no process followed the feed is
// delivered once one does, every transition in order.
func TestCatchUp(t *testing.T) {
	engines(t, func(t *testing.T, dsn string) {
		ctx, cancel := context.WithCancel(t.Context())
		const p, secret = "acme", "0123456789abcdef0123"
		st := openProject(t, ctx, dsn, p, "2a9d3c9e-8c4f-4d5e-9a6b-000000000001")
		inv := inventory.New(st, inventory.Options{})
		r := newReceiver(t, secret, 0, false)
		if _, _, err := inv.CreateWebhook(ctx, p, inventory.WebhookInput{URL: r.srv.URL, Secret: secret,
			EventTypes: []string{eim.EventInstanceRunning, eim.EventInstanceProvisioningFailed, eim.EventInstanceUpdateFailed}}); err != nil {
			t.Fatal(err)
		}
		// The follower runs once (its position saved), then stops.
		svc := webhooks.New(webhooks.Options{Store: st, Poll: 50 * time.Millisecond})
		fctx, stop := context.WithCancel(ctx)
		var fwg sync.WaitGroup
		fwg.Go(func() { _ = svc.Follow(fctx) })
		in := &eim.Instance{Name: "i"}
		mod := eim.WithActor(ctx, eim.ModuleActor("provisioning"))
		write := func(fields ...string) {
			t.Helper()
			if err := st.Update(mod, p, func(tx eim.Tx) error { return tx.UpdateFields(mod, in, fields...) }); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.Update(mod, p, func(tx eim.Tx) error { return tx.Create(mod, in) }); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "the follower handles the creation", func() bool {
			c, err := st.AuditCursors(ctx, p, []string{in.ResourceID})
			return err == nil && c[in.ResourceID] > 0
		})
		stop()
		fwg.Wait()
		// Meanwhile: provisioning fails, is retried, runs, an update fails.
		in.ProvisioningStatusIndicator = eim.StatusError
		write("provisioningStatusIndicator")
		in.ProvisioningStatusIndicator = eim.StatusInProgress
		write("provisioningStatusIndicator")
		in.CurrentState, in.ProvisioningStatusIndicator = eim.InstanceStateRunning, eim.StatusIdle
		write("currentState", "provisioningStatusIndicator")
		in.UpdateStatusIndicator = eim.StatusError
		write("updateStatusIndicator")

		var wg sync.WaitGroup
		wg.Go(func() { _ = svc.Follow(ctx) })
		wg.Go(func() { _ = svc.Deliver(ctx) })
		defer func() { cancel(); wg.Wait() }()
		want := []string{eim.EventInstanceProvisioningFailed, eim.EventInstanceRunning, eim.EventInstanceUpdateFailed}
		eventually(t, 10*time.Second, "the missed transitions delivered", func() bool { got, _ := r.got(); return len(got) >= len(want) })
		got, errs := r.got()
		var types []string
		for _, d := range got {
			types = append(types, d.eventType)
		}
		if !slices.Equal(types, want) || len(errs) > 0 {
			t.Errorf("delivered: got %v (%v), want %v", types, errs, want)
		}
	})
}

// TestProjectDeleted: a project's deletion is delivered to its webhooks,
// which go with it.
func TestProjectDeleted(t *testing.T) {
	engines(t, func(t *testing.T, dsn string) {
		ctx, cancel := context.WithCancel(t.Context())
		st, err := sqlstore.Open(ctx, dsn, sqlstore.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		for i, p := range []string{"gone", "stays"} {
			if err := st.CreateProject(ctx, &eim.Project{Name: p, ID: fmt.Sprintf("2a9d3c9e-8c4f-4d5e-9a6b-00000000000%d", i)}); err != nil {
				t.Fatal(err)
			}
		}
		inv := inventory.New(st, inventory.Options{})
		svc := webhooks.New(webhooks.Options{Store: st, Poll: 50 * time.Millisecond})
		var wg sync.WaitGroup
		wg.Go(func() { _ = svc.Follow(ctx) })
		wg.Go(func() { _ = svc.Deliver(ctx) })
		defer func() { cancel(); wg.Wait() }()
		const secret = "0123456789abcdef0123"
		r := newReceiver(t, secret, 0, false)
		other := newReceiver(t, secret, 0, false)
		if _, _, err := inv.CreateWebhook(ctx, "gone", inventory.WebhookInput{URL: r.srv.URL, EventTypes: []string{eim.EventProjectDeleted}, Secret: secret}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := inv.CreateWebhook(ctx, "stays", inventory.WebhookInput{URL: other.srv.URL, EventTypes: []string{eim.EventProjectDeleted}, Secret: secret}); err != nil {
			t.Fatal(err)
		}
		// Once the follower follows the feed (a write it handles): a
		// deletion before its first start would be before its position.
		h := &eim.Host{Name: "h", CurrentState: eim.HostStateOnboarded}
		if err := st.Update(ctx, "stays", func(tx eim.Tx) error { return tx.Create(ctx, h) }); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "the follower handles a write", func() bool {
			c, err := st.AuditCursors(ctx, "stays", []string{h.ResourceID})
			return err == nil && c[h.ResourceID] > 0
		})
		if err := inv.DeleteProject(ctx, "gone", true); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "project.deleted delivered", func() bool { got, _ := r.got(); return len(got) == 1 })
		got, errs := r.got()
		if got[0].eventType != eim.EventProjectDeleted || got[0].resourceID != "gone" || len(errs) > 0 {
			t.Errorf("delivered: got %+v (%v), want project.deleted of gone", got, errs)
		}
		eventually(t, 10*time.Second, "the deleted project's webhooks go", func() bool {
			ws, err := st.ListWebhooks(ctx, "gone")
			return err == nil && len(ws) == 0
		})
		if n := other.count(); n != 0 {
			t.Errorf("another project's webhook: called %d times, want never", n)
		}
	})
}

// TestAddressCheckedWhenCalled: a webhook whose address is refused (a
// link-local one, stored while the server allowed them, or a name that
// resolves to one) is not called: the delivery's error says why.
func TestAddressCheckedWhenCalled(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	st, err := sqlstore.Open(ctx, filepath.Join(t.TempDir(), "eim.db"), sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	const p = "acme"
	if err := st.CreateProject(ctx, &eim.Project{Name: p, ID: "2a9d3c9e-8c4f-4d5e-9a6b-000000000001"}); err != nil {
		t.Fatal(err)
	}
	w := &eim.Webhook{Project: p, URL: "http://169.254.169.254:9/latest", EventTypes: []string{eim.EventProjectDeleted}, Secret: "0123456789abcdef0123"}
	if err := st.CreateWebhook(ctx, w); err != nil {
		t.Fatal(err)
	}
	if _, err := st.QueueEvents(ctx, p, []eim.CursorMove{{ResourceID: p, Upto: 1,
		Events: []eim.Notification{{ID: eim.NewEventID(), Type: eim.EventProjectDeleted, Body: []byte(`{}`)}}}}); err != nil {
		t.Fatal(err)
	}
	svc := webhooks.New(webhooks.Options{Store: st, Poll: 20 * time.Millisecond, Timeout: time.Second})
	var wg sync.WaitGroup
	wg.Go(func() { _ = svc.Deliver(ctx) })
	defer func() { cancel(); wg.Wait() }()
	eventually(t, 5*time.Second, "the attempt is recorded", func() bool {
		ds, _, err := st.Deliveries(ctx, p, w.ID, 10, 0)
		return err == nil && len(ds) == 1 && ds[0].Attempts > 0
	})
	ds, _, _ := st.Deliveries(ctx, p, w.ID, 10, 0)
	if d := ds[0]; d.State != eim.DeliveryPending || d.LastStatus != 0 || !strings.Contains(d.LastError, "link-local") {
		t.Errorf("delivery to a link-local address: got %s, status %d, %q; want pending with an error naming link-local", d.State, d.LastStatus, d.LastError)
	}
}

// openProject opens the store at dsn (closed with the test) with the
// project name created.
func openProject(t *testing.T, ctx context.Context, dsn, name, id string) *sqlstore.Store {
	t.Helper()
	st, err := sqlstore.Open(ctx, dsn, sqlstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.CreateProject(ctx, &eim.Project{Name: name, ID: id}); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestNoWebhooksNoWork: the follower reads nothing and moves no cursor in
// a project without webhooks; a webhook created later gets the changes
// from its creation on, not the resource's earlier history.
func TestNoWebhooksNoWork(t *testing.T) {
	engines(t, func(t *testing.T, dsn string) {
		ctx, cancel := context.WithCancel(t.Context())
		const p, secret = "acme", "0123456789abcdef0123"
		st := openProject(t, ctx, dsn, p, "2a9d3c9e-8c4f-4d5e-9a6b-000000000002")
		inv := inventory.New(st, inventory.Options{})
		svc := webhooks.New(webhooks.Options{Store: st, Poll: 50 * time.Millisecond})
		var wg sync.WaitGroup
		wg.Go(func() { _ = svc.Follow(ctx) })
		wg.Go(func() { _ = svc.Deliver(ctx) })
		defer func() { cancel(); wg.Wait() }()

		in := &eim.Instance{Name: "i"}
		mod := eim.WithActor(ctx, eim.ModuleActor("provisioning"))
		write := func(fields ...string) {
			t.Helper()
			if err := st.Update(mod, p, func(tx eim.Tx) error { return tx.UpdateFields(mod, in, fields...) }); err != nil {
				t.Fatal(err)
			}
		}
		if err := st.Update(mod, p, func(tx eim.Tx) error { return tx.Create(mod, in) }); err != nil {
			t.Fatal(err)
		}
		in.ProvisioningStatusIndicator = eim.StatusError // before any webhook
		write("provisioningStatusIndicator")
		time.Sleep(500 * time.Millisecond)
		c, err := st.AuditCursors(ctx, p, []string{in.ResourceID})
		if err != nil || len(c) != 0 {
			t.Fatalf("cursors in a project without webhooks: %v (%v), want none", c, err)
		}

		r := newReceiver(t, secret, 0, false)
		if _, _, err := inv.CreateWebhook(ctx, p, inventory.WebhookInput{URL: r.srv.URL, Secret: secret,
			EventTypes: []string{eim.EventInstanceRunning, eim.EventInstanceProvisioningFailed}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond) // the next change's time is after the webhook's
		in.CurrentState, in.ProvisioningStatusIndicator = eim.InstanceStateRunning, eim.StatusIdle
		write("currentState", "provisioningStatusIndicator")
		eventually(t, 10*time.Second, "the change after the webhook's creation delivered", func() bool { return r.count() >= 1 })
		time.Sleep(300 * time.Millisecond) // anything else queued would be delivered by now
		got, errs := r.got()
		var types []string
		for _, d := range got {
			types = append(types, d.eventType)
		}
		if !slices.Equal(types, []string{eim.EventInstanceRunning}) || len(errs) > 0 {
			t.Errorf("delivered: got %v (%v), want only %s (the failure came before the webhook)", types, errs, eim.EventInstanceRunning)
		}
	})
}

// TestSealedSecrets: with a secrets key, a webhook's secret is stored
// sealed (the database holds no copy in the clear) and deliveries are
// signed with the secret as given; a secret stored before sealing is
// still used; a deliverer holding another key signs nothing and says why.
func TestSealedSecrets(t *testing.T) {
	engines(t, func(t *testing.T, dsn string) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		const p, given = "acme", "0123456789abcdef0123-given"
		st := openProject(t, ctx, dsn, p, "2a9d3c9e-8c4f-4d5e-9a6b-000000000001")
		key, err := seal.LoadDir(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		inv := inventory.New(st, inventory.Options{Secrets: key})
		types := []string{eim.EventProjectDeleted}
		rGiven := newReceiver(t, given, 0, false)
		wGiven, _, err := inv.CreateWebhook(ctx, p, inventory.WebhookInput{URL: rGiven.srv.URL, EventTypes: types, Secret: given})
		if err != nil {
			t.Fatal(err)
		}
		wGen, generated, err := inv.CreateWebhook(ctx, p, inventory.WebhookInput{URL: "http://127.0.0.1:1/", EventTypes: types})
		if err != nil || generated == "" {
			t.Fatalf("create with a generated secret: %q, %v", generated, err)
		}
		rGen := newReceiver(t, generated, 0, false)
		// Stored before sealing existed: in the clear, still used.
		const legacy = "0123456789abcdef0123-legacy"
		rLegacy := newReceiver(t, legacy, 0, false)
		wLegacy := &eim.Webhook{Project: p, URL: rLegacy.srv.URL, EventTypes: types, Secret: legacy}
		if err := st.CreateWebhook(ctx, wLegacy); err != nil {
			t.Fatal(err)
		}
		// A new URL keeps the sealed secret as it was; "new" seals a new one.
		u := rGen.srv.URL
		if _, _, err := inv.UpdateWebhook(ctx, p, wGen.ID, inventory.WebhookChange{URL: &u}); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			id, secret string
		}{{wGiven.ID, given}, {wGen.ID, generated}} {
			w, err := st.FindWebhook(ctx, p, c.id)
			if err != nil {
				t.Fatal(err)
			}
			if !seal.IsSealedText(w.Secret) || strings.Contains(w.Secret, c.secret) {
				t.Fatalf("webhook %s: stored secret %q is not sealed", c.id, w.Secret)
			}
		}

		var upto int64
		queue := func() {
			t.Helper()
			upto++
			id := eim.NewEventID()
			body, err := json.Marshal(webhooks.Payload{ID: id, Type: eim.EventProjectDeleted, Project: p, ResourceID: p})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := st.QueueEvents(ctx, p, []eim.CursorMove{{ResourceID: p, From: upto - 1, Upto: upto,
				Events: []eim.Notification{{ID: id, Type: eim.EventProjectDeleted, Body: body}}}}); err != nil {
				t.Fatal(err)
			}
		}
		run := func(k *seal.Key) (stop func()) {
			dctx, dcancel := context.WithCancel(ctx)
			svc := webhooks.New(webhooks.Options{Store: st, Secrets: k, Poll: 20 * time.Millisecond, Timeout: 2 * time.Second})
			var wg sync.WaitGroup
			wg.Go(func() { _ = svc.Deliver(dctx) })
			return func() { dcancel(); wg.Wait() }
		}
		queue()
		stop := run(key)
		for _, r := range []*receiver{rGiven, rGen, rLegacy} {
			eventually(t, 10*time.Second, "each webhook's delivery", func() bool { got, _ := r.got(); return len(got) == 1 })
			if _, errs := r.got(); len(errs) > 0 {
				t.Fatalf("signature: %v", errs)
			}
		}
		// The deliverer records a delivery once its answer came back: stopped
		// before that, the delivery stays due and is sent again later, ahead
		// of the next one of its resource (at least once, in order), which
		// would hold the second round back.
		for _, id := range []string{wGiven.ID, wGen.ID, wLegacy.ID} {
			eventually(t, 10*time.Second, "each delivery recorded", func() bool {
				ds, _, err := st.Deliveries(ctx, p, id, 10, 0)
				return err == nil && len(ds) == 1 && ds[0].State == eim.DeliveryDelivered
			})
		}
		stop()

		other, err := seal.LoadDir(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		queue()
		stop = run(other)
		defer stop()
		eventually(t, 10*time.Second, "the legacy webhook's second delivery", func() bool { got, _ := rLegacy.got(); return len(got) == 2 })
		eventually(t, 10*time.Second, "the failed attempt recorded", func() bool {
			ds, _, err := st.Deliveries(ctx, p, wGiven.ID, 10, 0)
			return err == nil && len(ds) == 2 && ds[0].Attempts > 0
		})
		ds, _, _ := st.Deliveries(ctx, p, wGiven.ID, 10, 0)
		if d := ds[0]; d.State != eim.DeliveryPending || !strings.Contains(d.LastError, "--secrets-key") {
			t.Errorf("delivery under another key: got %s, %q; want pending with an error naming --secrets-key", d.State, d.LastError)
		}
		if rGiven.count() != 1 || rGen.count() != 1 {
			t.Errorf("requests sent unsigned or wrongly signed: %d, %d", rGiven.count()-1, rGen.count()-1)
		}
	})
}
