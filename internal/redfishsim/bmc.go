package redfishsim

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Config describes a BMC.
type Config struct {
	Username, Password string // the one account (Basic auth and sessions)
	Systems            []SystemConfig
	// MaxSessions limits the open sessions (0: no limit); SessionLimitStatus
	// is the answer to one more (default 503, as OpenBMC's bmcweb; Dell's
	// iDRAC answers 400).
	MaxSessions        int
	SessionLimitStatus int
	SessionTimeout     time.Duration // idle sessions expire (default 30 min)
	Faults             Faults
	Now                func() time.Time // the clock (default time.Now)
}

// SystemConfig is one ComputerSystem of the service.
type SystemConfig struct {
	ID           string // default "1", "2"…
	ManagerID    string // its manager (default "BMC", or "BMC-<ID>" when there are several systems)
	UUID         string // default derived from the ID and serial number
	SerialNumber string // default "SIM<ID>"
	Machine      Machine
	ResetTypes   []ResetType // default ResetTypes
	BootTargets  []string    // default BootTargets
}

// Faults are the ways real BMCs misbehave that a BMC can be told to copy.
type Faults struct {
	// DropPowerOns: the next N power-on requests (On, ForceOn,
	// PushPowerButton of an off system) are answered 204 and do nothing.
	DropPowerOns int
	// ConflictInState: a power action the system is already in (On or
	// ForceOn when on; GracefulShutdown, ForceOff, GracefulRestart or
	// ForceRestart when off) answers 409, as Dell's iDRAC, instead of 204.
	ConflictInState bool
	// OnceAsContinuous: a one-time boot override is stored (and read back)
	// as Continuous, so it is not cleared after the boot.
	OnceAsContinuous bool
	// OnceIgnored: a one-time boot override is accepted and cleared, but the
	// machine boots from its normal order (iDRAC9 reports).
	OnceIgnored bool
	// NoBootMode: the system has no BootSourceOverrideMode (Supermicro).
	NoBootMode bool
	// AsyncTasks: resets and virtual media actions answer 202 with a task
	// monitor, which answers 202 (Running) this many times before the task
	// reads Completed (tasks.go).
	AsyncTasks int
	// TaskException: with AsyncTasks, an accepted action is not done and
	// its task ends in the Exception state.
	TaskException bool
	// NoMediaActions: the virtual CD lists no InsertMedia or EjectMedia
	// action (older services, Lenovo's XCC): clients PATCH its Image and
	// Inserted instead (media.go).
	NoMediaActions bool
}

// Action is one reset request the BMC received, with what it did.
type Action struct {
	At     time.Time
	System string
	Type   ResetType
	Result string // "done", "dropped" (a fault or a power-on during a shutdown), "already", "conflict", "error"
	Boot   Boot   // the boot it started, for done actions that boot
}

// BMC is a Redfish service (an http.Handler) in front of its machines.
type BMC struct {
	user, password string
	now            func() time.Time
	sessions       *sessions
	systems        []*system
	byID           map[string]*system
	byManager      map[string]*system

	mu      sync.Mutex
	faults  Faults
	actions []Action
	tasks   map[string]*task
	taskSeq int
}

// system is a ComputerSystem, its manager, chassis and virtual CD.
type system struct {
	id, managerID, uuid, serial string
	machine                     Machine
	resetTypes                  []ResetType
	targets                     []string

	mu sync.Mutex // serialises actions on the machine and guards below
	// Boot settings.
	target, enabled, mode, httpBootURI string
	assetTag                           string
	// The virtual CD.
	image          string
	inserted       bool
	writeProtected bool
}

// New returns a BMC for cfg.
func New(cfg Config) (*BMC, error) {
	if cfg.Username == "" {
		return nil, fmt.Errorf("redfishsim: no username")
	}
	if len(cfg.Systems) == 0 {
		return nil, fmt.Errorf("redfishsim: no system")
	}
	now := cfg.Now
	if now == nil {
		now = time.Now
	}
	limitStatus := cfg.SessionLimitStatus
	if limitStatus == 0 {
		limitStatus = http.StatusServiceUnavailable
	}
	timeout := cfg.SessionTimeout
	if timeout == 0 {
		timeout = 30 * time.Minute
	}
	b := &BMC{
		user: cfg.Username, password: cfg.Password, now: now,
		sessions:  newSessions(now, cfg.MaxSessions, limitStatus, timeout),
		byID:      map[string]*system{},
		byManager: map[string]*system{},
		faults:    cfg.Faults,
	}
	for i, sc := range cfg.Systems {
		if sc.Machine == nil {
			return nil, fmt.Errorf("redfishsim: system %d has no machine", i)
		}
		s := &system{
			id: sc.ID, managerID: sc.ManagerID, uuid: sc.UUID, serial: sc.SerialNumber,
			machine: sc.Machine, resetTypes: sc.ResetTypes, targets: sc.BootTargets,
			target: "None", enabled: "Disabled", mode: "UEFI", writeProtected: true,
		}
		if s.id == "" {
			s.id = fmt.Sprint(i + 1)
		}
		if s.managerID == "" {
			s.managerID = "BMC"
			if len(cfg.Systems) > 1 {
				s.managerID = "BMC-" + s.id
			}
		}
		if s.serial == "" {
			s.serial = "SIM" + s.id
		}
		if s.uuid == "" {
			h := sha256.Sum256([]byte(s.id + "/" + s.serial))
			h[6] = h[6]&0x0f | 0x50 // a name-based UUID's version and variant
			h[8] = h[8]&0x3f | 0x80
			x := hex.EncodeToString(h[:16])
			s.uuid = x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:32]
		}
		if s.resetTypes == nil {
			s.resetTypes = ResetTypes
		}
		if s.targets == nil {
			s.targets = BootTargets
		}
		if b.byID[s.id] != nil || b.byManager[s.managerID] != nil {
			return nil, fmt.Errorf("redfishsim: system %q or manager %q twice", s.id, s.managerID)
		}
		b.systems = append(b.systems, s)
		b.byID[s.id] = s
		b.byManager[s.managerID] = s
	}
	return b, nil
}

// SetFaults changes the faults the BMC copies from now on.
func (b *BMC) SetFaults(f Faults) {
	b.mu.Lock()
	b.faults = f
	b.mu.Unlock()
}

// Faults returns the faults in effect (DropPowerOns counts down).
func (b *BMC) Faults() Faults {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.faults
}

// Actions returns the reset requests received so far, oldest first.
func (b *BMC) Actions() []Action {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.actions)
}

// Sessions returns the number of open sessions.
func (b *BMC) Sessions() int { return b.sessions.count() }

// SessionsOpened returns the number of sessions opened so far.
func (b *BMC) SessionsOpened() int { return b.sessions.opened() }

// BootOverride returns a system's boot override settings as the BMC holds
// them: target, enabled (Disabled, Once, Continuous) and mode.
func (b *BMC) BootOverride(systemID string) (target, enabled, mode string, ok bool) {
	s := b.byID[systemID]
	if s == nil {
		return "", "", "", false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.target, s.enabled, s.mode, true
}

// VirtualCD returns the image inserted in a system's virtual CD ("" when none).
func (b *BMC) VirtualCD(systemID string) (image string, ok bool) {
	s := b.byID[systemID]
	if s == nil {
		return "", false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.inserted {
		return "", true
	}
	return s.image, true
}

func (b *BMC) record(a Action) {
	a.At = b.now()
	b.mu.Lock()
	b.actions = append(b.actions, a)
	b.mu.Unlock()
}

// takeDrop counts a power-on request down the DropPowerOns fault and says
// whether to drop it.
func (b *BMC) takeDrop() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.faults.DropPowerOns > 0 {
		b.faults.DropPowerOns--
		return true
	}
	return false
}

const maxBody = 64 << 10

// ServeHTTP answers a Redfish request.
func (b *BMC) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("OData-Version", "4.0")
	w.Header().Set("Cache-Control", "no-cache")
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	if err := b.route(w, r); err != nil {
		writeJSON(w, err.status, err.body())
	}
}

// route dispatches by path; it returns the error to answer, or nil once it
// has answered.
func (b *BMC) route(w http.ResponseWriter, r *http.Request) *apiError {
	p := strings.TrimSuffix(r.URL.Path, "/")
	method := r.Method
	if method == http.MethodHead {
		method = http.MethodGet // net/http drops the body
	}
	switch p {
	case "/redfish":
		if method != http.MethodGet {
			return allow(w, method, "GET")
		}
		writeJSON(w, http.StatusOK, map[string]any{"v1": "/redfish/v1/"})
		return nil
	case "/redfish/v1":
		if method != http.MethodGet {
			return allow(w, method, "GET")
		}
		writeResource(w, b.root())
		return nil
	case "/redfish/v1/odata":
		if method != http.MethodGet {
			return allow(w, method, "GET")
		}
		writeJSON(w, http.StatusOK, odataDocument())
		return nil
	case "/redfish/v1/$metadata":
		if method != http.MethodGet {
			return allow(w, method, "GET")
		}
		w.Header().Set("Content-Type", "application/xml")
		_, _ = w.Write([]byte(metadataDocument))
		return nil
	case "/redfish/v1/SessionService/Sessions":
		if method == http.MethodPost { // logging in needs no authentication
			return b.login(w, r)
		}
	}
	if !strings.HasPrefix(p, "/redfish/v1/") {
		return errNotFound("Resource", p)
	}
	_, aerr := b.authenticate(r)
	if aerr != nil {
		w.Header().Set("WWW-Authenticate", `Basic realm="redfishsim"`)
		return aerr
	}
	seg := strings.Split(strings.TrimPrefix(p, "/redfish/v1/"), "/")
	switch seg[0] {
	case "SessionService":
		return b.routeSessions(w, r, method, seg[1:])
	case "Systems":
		return b.routeSystems(w, r, method, seg[1:])
	case "Managers":
		return b.routeManagers(w, r, method, seg[1:])
	case "Chassis":
		return b.routeChassis(w, method, seg[1:])
	case "TaskService":
		return b.routeTasks(w, method, seg[1:])
	}
	return errNotFound("Resource", p)
}

func (b *BMC) routeSystems(w http.ResponseWriter, r *http.Request, method string, seg []string) *apiError {
	if len(seg) == 0 {
		if method != http.MethodGet {
			return allow(w, method, "GET")
		}
		writeResource(w, b.collection("/redfish/v1/Systems", "#ComputerSystemCollection.ComputerSystemCollection", "Computer System Collection", func(s *system) string { return systemPath(s) }))
		return nil
	}
	s := b.byID[seg[0]]
	if s == nil {
		return errNotFound("ComputerSystem", seg[0])
	}
	switch {
	case len(seg) == 1:
		switch method {
		case http.MethodGet:
			writeResource(w, b.systemResource(r.Context(), s))
			return nil
		case http.MethodPatch:
			return b.patchSystem(w, r, s)
		}
		return allow(w, method, "GET, HEAD, PATCH")
	case len(seg) == 3 && seg[1] == "Actions":
		if method != http.MethodPost {
			return allow(w, method, "POST")
		}
		if seg[2] != "ComputerSystem.Reset" {
			return errActionNotSupported(seg[2])
		}
		return b.reset(w, r, s)
	}
	return errNotFound("Resource", r.URL.Path)
}

func (b *BMC) routeManagers(w http.ResponseWriter, r *http.Request, method string, seg []string) *apiError {
	if len(seg) == 0 {
		if method != http.MethodGet {
			return allow(w, method, "GET")
		}
		writeResource(w, b.collection("/redfish/v1/Managers", "#ManagerCollection.ManagerCollection", "Manager Collection", func(s *system) string { return managerPath(s) }))
		return nil
	}
	s := b.byManager[seg[0]]
	if s == nil {
		return errNotFound("Manager", seg[0])
	}
	switch {
	case len(seg) == 1:
		if method != http.MethodGet {
			return allow(w, method, "GET")
		}
		writeResource(w, managerResource(s))
		return nil
	case len(seg) == 2 && seg[1] == "VirtualMedia":
		if method != http.MethodGet {
			return allow(w, method, "GET")
		}
		writeResource(w, map[string]any{
			"@odata.id":           managerPath(s) + "/VirtualMedia",
			"@odata.type":         "#VirtualMediaCollection.VirtualMediaCollection",
			"Name":                "Virtual Media Collection",
			"Members":             []any{link(cdPath(s))},
			"Members@odata.count": 1,
		})
		return nil
	case len(seg) >= 3 && seg[1] == "VirtualMedia" && seg[2] == "Cd":
		if len(seg) == 3 {
			switch method {
			case http.MethodGet:
				writeResource(w, cdResource(s, b.Faults().NoMediaActions))
				return nil
			case http.MethodPatch:
				return b.patchMedia(w, r, s)
			}
			return allow(w, method, "GET, PATCH")
		}
		if len(seg) == 5 && seg[3] == "Actions" && !b.Faults().NoMediaActions {
			if method != http.MethodPost {
				return allow(w, method, "POST")
			}
			switch seg[4] {
			case "VirtualMedia.InsertMedia":
				return b.insertMedia(w, r, s)
			case "VirtualMedia.EjectMedia":
				return b.ejectMedia(w, r, s)
			}
			return errActionNotSupported(seg[4])
		}
	}
	return errNotFound("Resource", r.URL.Path)
}

func (b *BMC) routeChassis(w http.ResponseWriter, method string, seg []string) *apiError {
	if method != http.MethodGet {
		return allow(w, method, "GET")
	}
	if len(seg) == 0 {
		writeResource(w, b.collection("/redfish/v1/Chassis", "#ChassisCollection.ChassisCollection", "Chassis Collection", func(s *system) string { return chassisPath(s) }))
		return nil
	}
	s := b.byID[seg[0]]
	if s == nil || len(seg) > 1 {
		return errNotFound("Chassis", strings.Join(seg, "/"))
	}
	writeResource(w, chassisResource(s))
	return nil
}

func allow(w http.ResponseWriter, method, methods string) *apiError {
	w.Header().Set("Allow", methods)
	return errMethod(method)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status, body = http.StatusInternalServerError, []byte(`{"error":{"code":"Base.1.16.InternalError","message":"encoding the answer failed"}}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writeResource answers 200 with a resource and its ETag.
func writeResource(w http.ResponseWriter, v map[string]any) {
	w.Header().Set("ETag", etag(v))
	writeJSON(w, http.StatusOK, v)
}

// etag is a resource's strong ETag: a digest of its representation, as
// bmcweb makes them (so it changes with the power state too).
func etag(v map[string]any) string {
	body, _ := json.Marshal(v)
	h := sha256.Sum256(body)
	return `"` + hex.EncodeToString(h[:8]) + `"`
}

// matches says whether an If-Match header (a list of ETags, weak or strong,
// or *) matches current.
func matches(ifMatch, current string) bool {
	for _, t := range strings.Split(ifMatch, ",") {
		t = strings.TrimPrefix(strings.TrimSpace(t), "W/")
		if t == "*" || t == current {
			return true
		}
	}
	return false
}
