package redfishsim

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"
)

const sessionsPath = "/redfish/v1/SessionService/Sessions"

type session struct {
	id, user, token string
	lastUsed        time.Time
}

// sessions are the open sessions; an idle one expires after timeout, and
// expired ones no longer count towards the limit.
type sessions struct {
	now         func() time.Time
	max         int
	limitStatus int
	timeout     time.Duration

	mu    sync.Mutex
	next  int
	byID  map[string]*session
	byTok map[string]*session
}

func newSessions(now func() time.Time, max, limitStatus int, timeout time.Duration) *sessions {
	return &sessions{now: now, max: max, limitStatus: limitStatus, timeout: timeout,
		byID: map[string]*session{}, byTok: map[string]*session{}}
}

// expire drops idle sessions; called with mu held.
func (ss *sessions) expire() {
	now := ss.now()
	for id, s := range ss.byID {
		if now.Sub(s.lastUsed) > ss.timeout {
			delete(ss.byID, id)
			delete(ss.byTok, s.token)
		}
	}
}

func (ss *sessions) count() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.expire()
	return len(ss.byID)
}

func (ss *sessions) opened() int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.next
}

func (ss *sessions) create(user string) (*session, *apiError) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.expire()
	if ss.max > 0 && len(ss.byID) >= ss.max {
		return nil, errSessionLimit(ss.limitStatus)
	}
	tok := make([]byte, 24)
	_, _ = rand.Read(tok)
	ss.next++
	s := &session{id: strconv.Itoa(ss.next), user: user, token: hex.EncodeToString(tok), lastUsed: ss.now()}
	ss.byID[s.id] = s
	ss.byTok[s.token] = s
	return s, nil
}

// lookup finds a session by token and marks it used.
func (ss *sessions) lookup(token string) *session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.expire()
	s := ss.byTok[token]
	if s != nil {
		s.lastUsed = ss.now()
	}
	return s
}

func (ss *sessions) get(id string) *session {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.expire()
	return ss.byID[id]
}

func (ss *sessions) ids() []string {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.expire()
	ids := make([]string, 0, len(ss.byID))
	for id := range ss.byID {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { a, _ := strconv.Atoi(ids[i]); b, _ := strconv.Atoi(ids[j]); return a < b })
	return ids
}

func (ss *sessions) remove(id string) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	s := ss.byID[id]
	if s == nil {
		return false
	}
	delete(ss.byID, id)
	delete(ss.byTok, s.token)
	return true
}

func (b *BMC) credentialsOK(user, password string) bool {
	u := subtle.ConstantTimeCompare([]byte(user), []byte(b.user))
	p := subtle.ConstantTimeCompare([]byte(password), []byte(b.password))
	return u&p == 1
}

// authenticate accepts a session's X-Auth-Token or Basic credentials and
// returns the session used ("" for Basic).
func (b *BMC) authenticate(r *http.Request) (string, *apiError) {
	if tok := r.Header.Get("X-Auth-Token"); tok != "" {
		s := b.sessions.lookup(tok)
		if s == nil {
			return "", errNoSession()
		}
		return s.id, nil
	}
	if user, password, ok := r.BasicAuth(); ok && b.credentialsOK(user, password) {
		return "", nil
	}
	return "", errNoSession()
}

// login creates a session: POST SessionService/Sessions {UserName,
// Password}; 201 with the session, its token in X-Auth-Token and its URI in
// Location.
func (b *BMC) login(w http.ResponseWriter, r *http.Request) *apiError {
	body, aerr := decodeObject(r)
	if aerr != nil {
		return aerr
	}
	var user, password string
	for _, k := range []string{"UserName", "Password"} {
		raw, ok := body[k]
		if !ok {
			return errCreateMissing(k)
		}
		var v string
		if err := json.Unmarshal(raw, &v); err != nil {
			return newError(http.StatusBadRequest, msgTypeError("#/"+k, k, string(raw)))
		}
		if k == "UserName" {
			user = v
		} else {
			password = v
		}
	}
	if !b.credentialsOK(user, password) {
		return newError(http.StatusUnauthorized, message{id: "ResourceAtUriUnauthorized",
			text:       "While accessing the resource at " + sessionsPath + ", the service received an authorization error unauthorized.",
			args:       []string{sessionsPath, "unauthorized"},
			severity:   "Critical",
			resolution: "Ensure that the appropriate access is provided for the service in order for it to access the URI."})
	}
	s, aerr := b.sessions.create(user)
	if aerr != nil {
		return aerr
	}
	w.Header().Set("X-Auth-Token", s.token)
	w.Header().Set("Location", sessionsPath+"/"+s.id)
	writeJSON(w, http.StatusCreated, sessionResource(s))
	return nil
}

func sessionResource(s *session) map[string]any {
	return map[string]any{
		"@odata.id":   sessionsPath + "/" + s.id,
		"@odata.type": "#Session.v1_3_0.Session",
		"Id":          s.id,
		"Name":        "User Session",
		"UserName":    s.user,
	}
}

func (b *BMC) routeSessions(w http.ResponseWriter, r *http.Request, method string, seg []string) *apiError {
	switch {
	case len(seg) == 0:
		if method != http.MethodGet {
			return allow(w, method, "GET")
		}
		writeResource(w, map[string]any{
			"@odata.id":      "/redfish/v1/SessionService",
			"@odata.type":    "#SessionService.v1_1_8.SessionService",
			"Id":             "SessionService",
			"Name":           "Session Service",
			"ServiceEnabled": true,
			"SessionTimeout": int(b.sessions.timeout / time.Second),
			"Status":         map[string]any{"State": "Enabled", "Health": "OK"},
			"Sessions":       link(sessionsPath),
		})
		return nil
	case len(seg) == 1 && seg[0] == "Sessions":
		if method != http.MethodGet {
			return allow(w, method, "GET, POST")
		}
		ids := b.sessions.ids()
		members := make([]any, len(ids))
		for i, id := range ids {
			members[i] = link(sessionsPath + "/" + id)
		}
		writeResource(w, map[string]any{
			"@odata.id":           sessionsPath,
			"@odata.type":         "#SessionCollection.SessionCollection",
			"Name":                "Session Collection",
			"Members":             members,
			"Members@odata.count": len(members),
		})
		return nil
	case len(seg) == 2 && seg[0] == "Sessions":
		s := b.sessions.get(seg[1])
		if s == nil {
			return errNotFound("Session", seg[1])
		}
		switch method {
		case http.MethodGet:
			writeResource(w, sessionResource(s))
			return nil
		case http.MethodDelete:
			b.sessions.remove(s.id)
			w.WriteHeader(http.StatusNoContent)
			return nil
		}
		return allow(w, method, "GET, DELETE")
	}
	return errNotFound("Resource", r.URL.Path)
}
