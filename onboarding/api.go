package onboarding

import (
	"crypto/rand"
	"encoding/base64"
	"log/slog"
	"net/http"
	"strconv"
	"strings"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/apiv2"
)

// The enrollment lobby's API (docs/enrollment.md), beside the v1 API:
//
//	GET    /v1/projects/{p}/enrollmentrequests[?state=&serialNumber=&uuid=&pageSize=&offset=]
//	GET    /v1/projects/{p}/enrollmentrequests/{id}
//	POST   /v1/projects/{p}/enrollmentrequests/{id}/approve  {name, siteId, metadata}
//	POST   /v1/projects/{p}/enrollmentrequests/{id}/deny     {reason}
//	DELETE /v1/projects/{p}/enrollmentrequests/{id}
//	GET    /v1/projects/{p}/enrollmentrules
//	POST   /v1/projects/{p}/enrollmentrules  {name, kind, serialNumbers, matchLabels, siteId, metadata}
//	GET    /v1/projects/{p}/enrollmentrules/{id}
//	DELETE /v1/projects/{p}/enrollmentrules/{id}

// Paths of the lobby's API.
const (
	RequestsPath = "/v1/projects/{projectName}/enrollmentrequests"
	RulesPath    = "/v1/projects/{projectName}/enrollmentrules"
)

// Routes returns the lobby API's handlers by ServeMux pattern; auth
// verifies the callers (auth.Verifier).
func (s *Service) Routes(auth apiv2.Authenticator) map[string]http.Handler {
	a := &lobbyAPI{s: s, auth: auth}
	return map[string]http.Handler{
		"GET " + RequestsPath:                    a.wrap(a.listRequests),
		"GET " + RequestsPath + "/{id}":          a.wrap(a.getRequest),
		"POST " + RequestsPath + "/{id}/approve": a.wrap(a.approveRequest),
		"POST " + RequestsPath + "/{id}/deny":    a.wrap(a.denyRequest),
		"DELETE " + RequestsPath + "/{id}":       a.wrap(a.deleteRequest),
		"GET " + RulesPath:                       a.wrap(a.listRules),
		"POST " + RulesPath:                      a.wrap(a.createRule),
		"GET " + RulesPath + "/{id}":             a.wrap(a.getRule),
		"DELETE " + RulesPath + "/{id}":          a.wrap(a.deleteRule),
	}
}

type lobbyAPI struct {
	s    *Service
	auth apiv2.Authenticator
}

// call is what a handler works with.
type call struct {
	project string
	actor   string
}

// wrap authenticates, checks the project's read role for GET and its
// write role for the rest (a project the caller may not see answers as
// not theirs, whether it exists or not), and checks an {id} of the path.
func (a *lobbyAPI) wrap(fn func(http.ResponseWriter, *http.Request, *call) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := func() error {
			p, err := apiv2.Authenticate(r, a.auth)
			if err != nil {
				return err
			}
			name := r.PathValue("projectName")
			if name == "" || len(name) > 100 {
				return eim.Errorf(eim.EINVALID, "projectName: must be 1 to 100 characters")
			}
			proj, err := a.s.store.FindProject(r.Context(), name)
			if eim.ErrorCode(err) == eim.ENOTFOUND && !p.CanRead(&eim.Project{Name: name}) {
				return noAccess(name)
			}
			if err != nil {
				return err
			}
			allowed := p.CanWrite(proj)
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				allowed = p.CanRead(proj)
			}
			if !allowed {
				return noAccess(name)
			}
			if proj.Deleting && r.Method == http.MethodPost {
				return eim.Errorf(eim.ECONFLICT, "project %s is being deleted", proj.Name)
			}
			if id := r.PathValue("id"); id != "" {
				k := eim.KindEnrollment
				if strings.Contains(r.Pattern, "enrollmentrules") {
					k = eim.KindEnrollmentRule
				}
				if err := eim.CheckID(k, "id", id); err != nil {
					return err
				}
			}
			actor := eim.UserActor(p.Subject)
			ctx := eim.WithActor(r.Context(), actor)
			return fn(w, r.WithContext(ctx), &call{project: proj.Name, actor: actor})
		}()
		if err != nil {
			if eim.ErrorCode(err) == eim.EINTERNAL {
				a.s.log.LogAttrs(r.Context(), slog.LevelError, "internal error",
					slog.String("method", r.Method), slog.String("path", r.URL.Path), slog.Any("err", err))
			}
			apiv2.WriteError(w, err)
		}
	})
}

func noAccess(project string) error {
	return eim.Errorf(eim.EFORBIDDEN, "no access to project %q", project)
}

// RequestList is the list envelope of enrollment requests.
type RequestList struct {
	EnrollmentRequests []*eim.EnrollmentRequest `json:"enrollmentRequests"`
	TotalElements      int                      `json:"totalElements"`
	HasNext            bool                     `json:"hasNext"`
}

func (a *lobbyAPI) listRequests(w http.ResponseWriter, r *http.Request, c *call) error {
	q := eim.EnrollmentQuery{Limit: 20}
	v := r.URL.Query()
	for name, dst := range map[string]*int{"pageSize": &q.Limit, "offset": &q.Offset} {
		if s := v.Get(name); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 || n > 10000 || (name == "pageSize" && (n < 1 || n > 100)) {
				return eim.Errorf(eim.EINVALID, "%s: %q must be a number (pageSize 1 to 100, offset 0 to 10000)", name, s)
			}
			*dst = n
		}
	}
	if s := strings.ToUpper(v.Get("state")); s != "" {
		q.State = eim.EnrollmentState(s)
		if !q.State.Valid() {
			return eim.Errorf(eim.EINVALID, "state: %q must be PENDING, APPROVED or DENIED", v.Get("state"))
		}
	}
	q.UUID, q.Serial = v.Get("uuid"), v.Get("serialNumber")
	list, total, err := a.s.store.ListEnrollmentRequests(r.Context(), c.project, q)
	if err != nil {
		return err
	}
	if list == nil {
		list = []*eim.EnrollmentRequest{}
	}
	apiv2.WriteJSON(w, http.StatusOK, RequestList{EnrollmentRequests: list, TotalElements: total, HasNext: q.Offset+len(list) < total})
	return nil
}

func (a *lobbyAPI) getRequest(w http.ResponseWriter, r *http.Request, c *call) error {
	req, err := a.s.store.FindEnrollmentRequest(r.Context(), c.project, r.PathValue("id"))
	if err != nil {
		return err
	}
	apiv2.WriteJSON(w, http.StatusOK, req)
	return nil
}

// ApproveInput is the body of an approval (all optional).
type ApproveInput struct {
	Name     string       `json:"name"`
	SiteID   string       `json:"siteId"`
	Metadata eim.Metadata `json:"metadata"`
}

func (a *lobbyAPI) approveRequest(w http.ResponseWriter, r *http.Request, c *call) error {
	var in ApproveInput
	if r.ContentLength != 0 {
		if err := apiv2.DecodeStrict(r, &in); err != nil {
			return err
		}
	}
	if in.SiteID != "" {
		if err := eim.CheckID(eim.KindSite, "siteId", in.SiteID); err != nil {
			return err
		}
	}
	if err := eim.CheckApprovalMetadata("metadata", in.Metadata); err != nil {
		return err
	}
	req, err := a.s.approve(r.Context(), c.project, r.PathValue("id"), "", c.actor, eim.EnrollmentApproval{Name: in.Name, SiteID: in.SiteID, Metadata: in.Metadata})
	if err != nil {
		return err
	}
	apiv2.WriteJSON(w, http.StatusOK, req)
	return nil
}

// DenyInput is the body of a denial.
type DenyInput struct {
	Reason string `json:"reason"`
}

func (a *lobbyAPI) denyRequest(w http.ResponseWriter, r *http.Request, c *call) error {
	var in DenyInput
	if r.ContentLength != 0 {
		if err := apiv2.DecodeStrict(r, &in); err != nil {
			return err
		}
	}
	if len(in.Reason) > eim.MaxEnrollmentReason {
		return eim.Errorf(eim.EINVALID, "reason: at most %d bytes", eim.MaxEnrollmentReason)
	}
	req, err := a.s.store.DecideEnrollment(r.Context(), c.project, r.PathValue("id"),
		eim.EnrollmentDecision{State: eim.EnrollmentDenied, By: c.actor, Reason: in.Reason, At: a.s.now()}, nil)
	if err != nil {
		return err
	}
	apiv2.WriteJSON(w, http.StatusOK, req)
	return nil
}

func (a *lobbyAPI) deleteRequest(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := a.s.store.DeleteEnrollmentRequest(r.Context(), c.project, r.PathValue("id")); err != nil {
		return err
	}
	apiv2.WriteJSON(w, http.StatusOK, struct{}{})
	return nil
}

// RuleList is the list envelope of enrollment rules.
type RuleList struct {
	EnrollmentRules []*eim.EnrollmentRule `json:"enrollmentRules"`
	TotalElements   int                   `json:"totalElements"`
	HasNext         bool                  `json:"hasNext"`
}

// RuleInput is the body of a rule's creation.
type RuleInput struct {
	Name          string       `json:"name"`
	Kind          string       `json:"kind"`
	SerialNumbers []string     `json:"serialNumbers"`
	MatchLabels   eim.Metadata `json:"matchLabels"`
	SiteID        string       `json:"siteId"`
	Metadata      eim.Metadata `json:"metadata"`
}

// RuleCreated is the answer to a rule's creation: the rule, and a TOKEN
// rule's token (shown this once).
type RuleCreated struct {
	*eim.EnrollmentRule
	Token string `json:"token,omitempty"`
}

func (a *lobbyAPI) listRules(w http.ResponseWriter, r *http.Request, c *call) error {
	list, err := a.s.store.ListEnrollmentRules(r.Context(), c.project)
	if err != nil {
		return err
	}
	if list == nil {
		list = []*eim.EnrollmentRule{}
	}
	apiv2.WriteJSON(w, http.StatusOK, RuleList{EnrollmentRules: list, TotalElements: len(list)})
	return nil
}

func (a *lobbyAPI) createRule(w http.ResponseWriter, r *http.Request, c *call) error {
	var in RuleInput
	if err := apiv2.DecodeStrict(r, &in); err != nil {
		return err
	}
	rule := &eim.EnrollmentRule{Project: c.project, Name: strings.TrimSpace(in.Name), Kind: eim.EnrollmentRuleKind(strings.ToUpper(in.Kind)),
		SerialNumbers: in.SerialNumbers, MatchLabels: in.MatchLabels, SiteID: in.SiteID, Metadata: in.Metadata}
	if rule.Metadata == nil {
		rule.Metadata = eim.Metadata{}
	}
	if rule.MatchLabels == nil {
		rule.MatchLabels = eim.Metadata{}
	}
	if err := rule.Validate(); err != nil {
		return err
	}
	var token string
	if rule.Kind == eim.RuleToken {
		var b [24]byte
		if _, err := rand.Read(b[:]); err != nil {
			return err
		}
		token = base64.RawURLEncoding.EncodeToString(b[:])
		rule.TokenHash = tokenHash(token)
	}
	if err := a.s.store.CreateEnrollmentRule(r.Context(), rule); err != nil {
		return err
	}
	apiv2.WriteJSON(w, http.StatusOK, RuleCreated{EnrollmentRule: rule, Token: token})
	return nil
}

func (a *lobbyAPI) getRule(w http.ResponseWriter, r *http.Request, c *call) error {
	rule, err := a.s.store.FindEnrollmentRule(r.Context(), c.project, r.PathValue("id"))
	if err != nil {
		return err
	}
	apiv2.WriteJSON(w, http.StatusOK, rule)
	return nil
}

func (a *lobbyAPI) deleteRule(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := a.s.store.DeleteEnrollmentRule(r.Context(), c.project, r.PathValue("id")); err != nil {
		return err
	}
	apiv2.WriteJSON(w, http.StatusOK, struct{}{})
	return nil
}
