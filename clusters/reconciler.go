package clusters

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/feed"
)

// feedConsumer names the reconciler's position in the change feed: it
// runs in one process of the deployment at a time (a lease), and the
// process that takes it over resumes there.
const feedConsumer = "clusters"

// Reconcile runs the reconciler until ctx ends: every cluster whose
// events arrive (the API's writes, the nodes' reports, its own writes,
// which then change nothing), the cluster of a node's host that changed
// (an address learnt, the host deleted), and every cluster at each
// re-list. It is a run-once loop (server.Loop.Once): one process runs it
// at a time.
func (s *Service) Reconcile(ctx context.Context) error {
	r := newReconciler(s)
	return feed.New(feed.Options{Store: s.o.Store, Name: feedConsumer, Logger: s.log, Metrics: s.o.Metrics, Durable: true, MinWait: s.o.RetryWait,
		Kinds: []eim.Kind{eim.KindCluster, eim.KindHost},
		Handle: func(ctx context.Context, evs []eim.Event) error {
			seen := map[string]bool{}
			for _, ev := range evs {
				id := ev.ID
				if ev.Kind == eim.KindHost {
					// A host in no cluster known here costs a map read.
					if id = r.clusterOf(ev.Project, ev.ID); id == "" {
						continue
					}
				}
				k := ev.Project + "/" + id
				if seen[k] {
					continue
				}
				seen[k] = true
				if err := r.cluster(ctx, ev.Project, id); err != nil {
					if ctx.Err() != nil {
						return ctx.Err()
					}
					// The re-list tries again.
					s.log.Warn("clusters: reconcile", "project", ev.Project, "cluster", ev.ID, "err", err)
				}
			}
			return nil
		},
		Relist:      r.all,
		RelistEvery: s.o.Relist,
	}).Run(ctx)
}

// reconciler is one run of the reconciler.
type reconciler struct {
	s *Service
	// synced is, by cluster, the hosts its workload was last made to
	// hold (a digest), so that a report that changes no membership
	// reads no workload.
	mu     sync.Mutex
	synced map[string]string
	// hosts is the cluster of each node's host ("project/host" to the
	// cluster's ID) and nodes each cluster's hosts, as last read: a host's
	// change wakes its cluster. Filled by the re-list the feed runner
	// makes at the start, kept by every reconcile of a cluster after.
	hosts map[string]string
	nodes map[string][]string
}

func newReconciler(s *Service) *reconciler {
	return &reconciler{s: s, synced: map[string]string{}, hosts: map[string]string{}, nodes: map[string][]string{}}
}

// ReconcileOnce reconciles every cluster once (tests, tools).
func (s *Service) ReconcileOnce(ctx context.Context) error {
	return newReconciler(s).all(ctx)
}

// track records the hosts of a cluster's nodes (none: the cluster is
// gone).
func (r *reconciler) track(project, id string, nodes []*eim.ClusterNode) {
	ck := project + "/" + id
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, hk := range r.nodes[ck] {
		if r.hosts[hk] == id {
			delete(r.hosts, hk)
		}
	}
	if len(nodes) == 0 {
		delete(r.nodes, ck)
		return
	}
	hks := make([]string, 0, len(nodes))
	for _, n := range nodes {
		hk := project + "/" + n.HostID
		r.hosts[hk] = id
		hks = append(hks, hk)
	}
	r.nodes[ck] = hks
}

// clusterOf returns the ID of the cluster the host is a node of, "" for
// none.
func (r *reconciler) clusterOf(project, hostID string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.hosts[project+"/"+hostID]
}

func (r *reconciler) all(ctx context.Context) error {
	cs, err := r.s.o.Store.ListClusters(ctx, "")
	if err != nil {
		return err
	}
	var failed int
	for _, c := range cs {
		if err := r.cluster(ctx, c.Project, c.ID); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			failed++
			r.s.log.Warn("clusters: reconcile", "project", c.Project, "cluster", c.Name, "err", err)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d clusters of %d failed", failed, len(cs))
	}
	return nil
}

// cluster reconciles one cluster.
func (r *reconciler) cluster(ctx context.Context, project, id string) error {
	s := r.s
	c, err := s.o.Store.FindCluster(ctx, project, id)
	if eim.ErrorCode(err) == eim.ENOTFOUND {
		r.track(project, id, nil)
		return r.dropWorkload(ctx, project, id)
	}
	if err != nil {
		return err
	}
	r.track(project, id, c.Nodes)
	w, err := r.world(ctx, c)
	if err != nil {
		return err
	}
	// A connect token for the control-plane nodes' connect agents, issued
	// (or replaced when a third of its life is left) before the plans that
	// carry it.
	var issued *issuedToken
	if !c.Deleting && s.o.Connect() && slices.ContainsFunc(c.Nodes, func(n *eim.ClusterNode) bool { return n.Role.ControlPlane() }) {
		if issued, err = r.connectToken(ctx, c); err != nil {
			return err
		}
		if issued != nil {
			w.connectTokenID = issued.id
		}
	}
	next := clone(c)
	gone := step(next, w)
	if !gone && issued == nil && same(c, next) {
		return r.syncWorkload(ctx, c)
	}
	if gone {
		if err := s.o.Store.DeleteCluster(ctx, project, id); err != nil && eim.ErrorCode(err) != eim.ENOTFOUND {
			return err
		}
		if err := s.o.Store.ExpireConnectCredentials(ctx, project, c.Name, s.o.Now()); err != nil {
			return err
		}
		s.log.Info("clusters: cluster deleted", "project", project, "cluster", c.Name)
		return r.dropWorkload(ctx, project, id)
	}
	out, err := s.o.Store.UpdateCluster(ctx, project, id, func(cur *eim.Cluster) error {
		w := w
		if issued != nil {
			cur.ConnectToken, cur.ConnectTokenID = issued.sealed(s, cur), issued.id
		}
		w.connectTokenID = cur.ConnectTokenID
		if step(cur, w) {
			cur.Nodes = nil // gone: the next pass deletes it
		}
		return nil
	})
	if err != nil {
		return err
	}
	return r.syncWorkload(ctx, out)
}

// world reads what step needs: the templates the cluster's nodes name
// and its hosts' addresses.
func (r *reconciler) world(ctx context.Context, c *eim.Cluster) (world, error) {
	s := r.s
	ts, err := s.o.Store.ClusterTemplates(ctx, c.Project)
	if err != nil {
		return world{}, err
	}
	hosts := map[string]string{}
	ids := make([]string, 0, len(c.Nodes))
	for _, n := range c.Nodes {
		ids = append(ids, n.HostID)
	}
	if len(ids) > 0 {
		err = s.o.Store.View(ctx, c.Project, func(tx eim.Tx) error {
			rs, err := tx.GetMany(ctx, eim.KindHost, ids)
			if err != nil {
				return err
			}
			for _, res := range rs {
				h := res.(*eim.Host)
				if h.DesiredState == eim.HostStateDeleted {
					continue
				}
				hosts[h.ResourceID] = nodeAddress(h)
			}
			return nil
		})
		if err != nil {
			return world{}, err
		}
	}
	return world{
		now:            s.o.Now(),
		hosts:          hosts,
		connectTokenID: c.ConnectTokenID,
		template: func(name, version string) *eim.ClusterTemplate {
			for _, t := range ts {
				if t.Name == name && t.Version == version {
					return t
				}
			}
			return nil
		},
	}, nil
}

// issuedToken is a connect token issued for a cluster's plans.
type issuedToken struct {
	id, token string
}

func (t *issuedToken) sealed(s *Service, c *eim.Cluster) []byte {
	return s.o.Key.Seal([]byte(t.token), adConnect(c))
}

// connectToken issues the cluster's connect token when it has none, or
// one with less than a third of its life left; nil: the current one
// stays.
func (r *reconciler) connectToken(ctx context.Context, c *eim.Cluster) (*issuedToken, error) {
	s := r.s
	now := s.o.Now()
	if c.ConnectTokenID != "" {
		cred, err := s.o.Store.FindConnectCredential(ctx, c.ConnectTokenID)
		if err == nil && cred.Expires.Sub(now) > s.o.ConnectTokenTTL/3 {
			return nil, nil
		}
		if err != nil && eim.ErrorCode(err) != eim.ENOTFOUND {
			return nil, err
		}
	}
	cred, tok, err := eim.NewConnectToken(c.Project, c.Name, now, s.o.ConnectTokenTTL)
	if err != nil {
		return nil, err
	}
	// The agents holding the old token keep their tunnels a day, while
	// their new plans reach them.
	grace := now.Add(24 * time.Hour)
	if err := s.o.Store.CreateConnectCredential(ctx, cred, &grace); err != nil {
		return nil, err
	}
	s.log.Info("clusters: connect token issued", "project", c.Project, "cluster", c.Name, "credential", cred.ID, "expires", cred.Expires)
	return &issuedToken{id: cred.ID, token: tok}, nil
}

// clone copies what step changes.
func clone(c *eim.Cluster) *eim.Cluster {
	out := *c
	out.Labels = maps.Clone(c.Labels)
	out.Nodes = make([]*eim.ClusterNode, len(c.Nodes))
	for i, n := range c.Nodes {
		cp := *n
		out.Nodes[i] = &cp
	}
	return &out
}

// same reports whether step changed nothing of a that is stored.
func same(a, b *eim.Cluster) bool {
	if a.Status != b.Status || len(a.Nodes) != len(b.Nodes) {
		return false
	}
	for i := range a.Nodes {
		x, y := a.Nodes[i], b.Nodes[i]
		if x.HostID != y.HostID || x.Removing != y.Removing || x.Force != y.Force || x.Plan != y.Plan || x.Role != y.Role {
			return false
		}
	}
	return true
}

// workloadOf returns the cluster's workload (kind CLUSTER, externalId the
// cluster's ID), nil when there is none.
func (r *reconciler) workloadOf(ctx context.Context, project, id string) (*eim.Workload, []*eim.WorkloadMember, error) {
	var wl *eim.Workload
	var ms []*eim.WorkloadMember
	err := r.s.o.Store.View(ctx, project, func(tx eim.Tx) error {
		wl, ms = nil, nil
		items, _, err := tx.List(ctx, eim.KindWorkload, eim.Query{Where: []eim.Cond{{Field: "externalId", Value: id}}, Limit: 1, NoTotal: true})
		if err != nil || len(items) == 0 {
			return err
		}
		wl = items[0].(*eim.Workload)
		items, _, err = tx.List(ctx, eim.KindWorkloadMember, eim.Query{Where: []eim.Cond{{Field: "workloadId", Value: wl.ResourceID}}, NoTotal: true})
		for _, it := range items {
			ms = append(ms, it.(*eim.WorkloadMember))
		}
		return err
	})
	return wl, ms, err
}

// syncWorkload makes the cluster's workload hold its hosts' instances:
// the original's membership of a cluster's hosts.
func (r *reconciler) syncWorkload(ctx context.Context, c *eim.Cluster) error {
	inv := r.s.o.Inventory
	if inv == nil {
		return nil
	}
	var hosts []string
	for _, n := range c.Nodes {
		hosts = append(hosts, n.HostID)
	}
	slices.Sort(hosts)
	b, _ := json.Marshal(struct {
		N string
		H []string
		S string
	}{c.Name, hosts, c.Status.Lifecycle.Message})
	digest := string(b)
	r.mu.Lock()
	done := r.synced[c.Project+"/"+c.ID] == digest
	r.mu.Unlock()
	if done {
		return nil
	}
	wl, members, err := r.workloadOf(ctx, c.Project, c.ID)
	if err != nil {
		return err
	}
	if wl == nil {
		name := c.Name
		if len(name) > 50 {
			name = name[:50]
		}
		res, err := inv.Create(ctx, c.Project, &eim.Workload{Kind: eim.WorkloadKindCluster, Name: name, ExternalID: c.ID, Status: c.Status.Lifecycle.Message})
		if err != nil {
			return fmt.Errorf("workload of cluster %s: %w", c.Name, err)
		}
		wl = res.(*eim.Workload)
	}
	// The instances of the cluster's hosts.
	want := map[string]bool{}
	if len(hosts) > 0 {
		err = r.s.o.Store.View(ctx, c.Project, func(tx eim.Tx) error {
			clear(want)
			items, _, err := tx.List(ctx, eim.KindInstance, eim.Query{Where: []eim.Cond{{Field: "hostID", Value: hosts}}, NoTotal: true})
			for _, it := range items {
				want[it.Base().ResourceID] = true
			}
			return err
		})
		if err != nil {
			return err
		}
	}
	for _, m := range members {
		if want[m.InstanceID] {
			delete(want, m.InstanceID)
			continue
		}
		if err := inv.Delete(ctx, c.Project, eim.KindWorkloadMember, m.ResourceID); err != nil && eim.ErrorCode(err) != eim.ENOTFOUND {
			return fmt.Errorf("workload of cluster %s: %w", c.Name, err)
		}
	}
	for inst := range want {
		_, err := inv.Create(ctx, c.Project, &eim.WorkloadMember{Kind: eim.WorkloadMemberKindClusterNode, WorkloadID: wl.ResourceID, InstanceID: inst})
		if err != nil {
			// An instance in another workload stays there: said, not retried
			// until the cluster's nodes change.
			r.s.log.Warn("clusters: workload member", "project", c.Project, "cluster", c.Name, "instance", inst, "err", err)
		}
	}
	if wl.Status != c.Status.Lifecycle.Message {
		wl.Status = c.Status.Lifecycle.Message
		if _, err := inv.Update(ctx, c.Project, wl, []string{"status"}); err != nil {
			return fmt.Errorf("workload of cluster %s: %w", c.Name, err)
		}
	}
	r.mu.Lock()
	r.synced[c.Project+"/"+c.ID] = digest
	r.mu.Unlock()
	return nil
}

// dropWorkload removes a deleted cluster's workload and its members.
func (r *reconciler) dropWorkload(ctx context.Context, project, id string) error {
	r.mu.Lock()
	delete(r.synced, project+"/"+id)
	r.mu.Unlock()
	inv := r.s.o.Inventory
	if inv == nil {
		return nil
	}
	wl, members, err := r.workloadOf(ctx, project, id)
	if err != nil || wl == nil {
		if eim.ErrorCode(err) == eim.ENOTFOUND {
			return nil // the project is gone
		}
		return err
	}
	for _, m := range members {
		if err := inv.Delete(ctx, project, eim.KindWorkloadMember, m.ResourceID); err != nil && eim.ErrorCode(err) != eim.ENOTFOUND {
			return err
		}
	}
	if err := inv.Delete(ctx, project, eim.KindWorkload, wl.ResourceID); err != nil && eim.ErrorCode(err) != eim.ENOTFOUND {
		return err
	}
	return nil
}
