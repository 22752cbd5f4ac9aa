package oob

import (
	"net/http"
	"strings"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/apiv2"
)

// BMCInput is the body of PUT …/bmc: the BMC's settings, which replace
// those stored. A Password left out keeps the stored one.
type BMCInput struct {
	Protocol string  `json:"protocol"`
	Address  string  `json:"address"`
	SystemID string  `json:"systemId,omitempty"`
	Username string  `json:"username"`
	Password *string `json:"password,omitempty"`
	CACert   string  `json:"caCert,omitempty"`
	Insecure bool    `json:"insecure,omitempty"`
}

// BMCView is a BMC as the API answers it: never its password, only
// whether one is set.
type BMCView struct {
	HostID       string              `json:"hostId"`
	Protocol     string              `json:"protocol"`
	Address      string              `json:"address"`
	SystemID     string              `json:"systemId,omitempty"`
	Username     string              `json:"username"`
	PasswordSet  bool                `json:"passwordSet"`
	CACert       string              `json:"caCert,omitempty"`
	Insecure     bool                `json:"insecure"`
	Capabilities eim.BMCCapabilities `json:"capabilities"`
	Reachable    eim.BMCReachable    `json:"reachable"`
	Timestamps   struct {
		CreatedAt eim.Time `json:"createdAt"`
		UpdatedAt eim.Time `json:"updatedAt"`
	} `json:"timestamps"`
}

func view(b *eim.BMC) *BMCView {
	v := &BMCView{HostID: b.HostID, Protocol: string(b.Protocol), Address: b.Address, SystemID: b.SystemID,
		Username: b.Username, PasswordSet: b.SealedPassword != "", CACert: b.CACert, Insecure: b.Insecure,
		Capabilities: b.Capabilities, Reachable: b.Reachable}
	v.Timestamps.CreatedAt, v.Timestamps.UpdatedAt = b.CreatedAt, b.UpdatedAt
	return v
}

func (s *Service) putBMC(w http.ResponseWriter, r *http.Request, c *call) error {
	var in BMCInput
	if err := apiv2.DecodeStrict(r, &in); err != nil {
		return err
	}
	b := &eim.BMC{Project: c.project, HostID: c.hostID, Protocol: eim.BMCProtocol(strings.ToUpper(strings.TrimSpace(in.Protocol))),
		Address: strings.TrimSpace(in.Address), SystemID: in.SystemID, Username: in.Username, CACert: in.CACert, Insecure: in.Insecure}
	if err := b.Validate(); err != nil {
		return err
	}
	if in.Password != nil {
		if err := eim.CheckBMCPassword(b.Protocol, *in.Password); err != nil {
			return err
		}
		b.SealedPassword = s.o.Key.SealText(*in.Password, eim.BMCPasswordPurpose(c.project, c.hostID))
	}
	if err := s.o.Store.PutBMC(r.Context(), b); err != nil {
		return err
	}
	apiv2.WriteJSON(w, http.StatusOK, view(b))
	return nil
}

func (s *Service) getBMC(w http.ResponseWriter, r *http.Request, c *call) error {
	b, err := s.o.Store.GetBMC(r.Context(), c.project, c.hostID)
	if err != nil {
		return err
	}
	apiv2.WriteJSON(w, http.StatusOK, view(b))
	return nil
}

func (s *Service) deleteBMC(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := s.o.Store.DeleteBMC(r.Context(), c.project, c.hostID); err != nil {
		return err
	}
	apiv2.WriteJSON(w, http.StatusOK, struct{}{}) // {}, as the v1 API's deletes
	return nil
}
