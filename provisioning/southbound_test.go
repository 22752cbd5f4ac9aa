package provisioning_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/auth"
	"github.com/eimhq/eim/hostmgr"
	hostv1 "github.com/eimhq/eim/proto/eim/host/v1"
	"github.com/eimhq/eim/proto/eim/host/v1/hostv1connect"
	provisioningv1 "github.com/eimhq/eim/proto/eim/provisioning/v1"
	"github.com/eimhq/eim/proto/eim/provisioning/v1/provisioningv1connect"
	"github.com/eimhq/eim/southbound"
)

// bearer adds a node token to every call.
type bearer string

func (b bearer) WrapUnary(next connect.UnaryFunc) connect.UnaryFunc {
	return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
		req.Header().Set("Authorization", "Bearer "+string(b))
		return next(ctx, req)
	}
}
func (b bearer) WrapStreamingClient(next connect.StreamingClientFunc) connect.StreamingClientFunc {
	return next
}
func (b bearer) WrapStreamingHandler(next connect.StreamingHandlerFunc) connect.StreamingHandlerFunc {
	return next
}

// TestOverSouthbound runs a node's whole provisioning through the real
// southbound server: Connect over HTTP, node tokens, the interceptor.
func TestOverSouthbound(t *testing.T) {
	run(t, func(t *testing.T, e *env) {
		_, key, _ := ed25519.GenerateKey(rand.Reader)
		iss, err := auth.NewIssuer(key)
		if err != nil {
			t.Fatal(err)
		}
		sb := southbound.New(southbound.Options{Store: e.store, Issuer: iss})
		ic := connect.WithInterceptors(sb.Interceptor())
		sb.Mount(provisioningv1connect.NewProvisioningServiceHandler(e.svc, ic))
		sb.Mount(hostv1connect.NewHostServiceHandler(hostmgr.New(hostmgr.Options{Store: e.store, ReportIn: e.svc.ReportIn}), ic))
		srv := httptest.NewServer(sb)
		t.Cleanup(srv.Close)

		h := e.host()
		in := e.instance(h, e.os("https://images.example/a.raw", goodSha), nil)
		// Credentials as onboarding issues them.
		_, hash := southbound.NewSecret()
		err = e.store.Update(e.ctx, e.proj, func(tx eim.Tx) error {
			r, err := tx.Get(e.ctx, eim.KindHost, h.ResourceID)
			if err != nil {
				return err
			}
			h = r.(*eim.Host)
			h.NodeSecretHash, h.NodeCredGen = hash, h.NodeCredGen+1
			return tx.Update(e.ctx, h)
		})
		if err != nil {
			t.Fatal(err)
		}
		tok, _, err := iss.MintNode(auth.NodeClaims{Subject: southbound.ClientID(h.ResourceID), HostID: h.ResourceID, Project: e.proj, Gen: h.NodeCredGen}, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		opt := connect.WithInterceptors(bearer(tok))
		prov := provisioningv1connect.NewProvisioningServiceClient(http.DefaultClient, srv.URL, opt)
		host := hostv1connect.NewHostServiceClient(http.DefaultClient, srv.URL, opt)
		ctx := e.ctx

		gw, err := prov.GetWorkflow(ctx, connect.NewRequest(&provisioningv1.GetWorkflowRequest{AgentVersion: "test"}))
		if err != nil {
			t.Fatalf("GetWorkflow: %v", err)
		}
		wf := gw.Msg.Workflow
		if gw.Msg.Disposition != provisioningv1.GetWorkflowResponse_DISPOSITION_RUN || len(wf.Actions) != 7 {
			t.Fatalf("got %v with %d actions", gw.Msg.Disposition, len(wf.Actions))
		}
		for i := range wf.Actions {
			for _, st := range []provisioningv1.ActionState{running, succeeded} {
				resp, err := prov.ReportAction(ctx, connect.NewRequest(&provisioningv1.ReportActionRequest{
					WorkflowId: wf.Id, Attempt: wf.Attempt, Index: uint32(i), State: st, Output: []byte("ok\n"),
				}))
				if err != nil || resp.Msg.Cancel {
					t.Fatalf("report %d %s: %v %v", i, st, resp, err)
				}
			}
		}
		if _, err := host.ReportIn(ctx, connect.NewRequest(&hostv1.ReportInRequest{Hostname: "edge-1"})); err != nil {
			t.Fatalf("ReportIn: %v", err)
		}
		if got := e.getInstance(in.ResourceID).CurrentState; got != eim.InstanceStateRunning {
			t.Fatalf("got instance %s, want RUNNING", got)
		}

		// Invalidating the host revokes the node at once.
		if err := e.inv.InvalidateHost(ctx, e.proj, h.ResourceID, "stolen"); err != nil {
			t.Fatal(err)
		}
		_, err = prov.GetWorkflow(ctx, connect.NewRequest(&provisioningv1.GetWorkflowRequest{}))
		if connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Fatalf("after invalidate: got %v, want Unauthenticated", err)
		}
		// Without a token nothing is served.
		anon := provisioningv1connect.NewProvisioningServiceClient(http.DefaultClient, srv.URL)
		if _, err := anon.GetWorkflow(ctx, connect.NewRequest(&provisioningv1.GetWorkflowRequest{})); connect.CodeOf(err) != connect.CodeUnauthenticated {
			t.Fatalf("no token: got %v, want Unauthenticated", err)
		}
	})
}
