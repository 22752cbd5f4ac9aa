package oob

import (
	"net/http"
	"strings"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/apiv2"
)

func (s *Service) putBMC(w http.ResponseWriter, r *http.Request, c *call) error {
	var in eim.BMCInput
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
	apiv2.WriteJSON(w, http.StatusOK, b.View())
	return nil
}

func (s *Service) getBMC(w http.ResponseWriter, r *http.Request, c *call) error {
	b, err := s.o.Store.GetBMC(r.Context(), c.project, c.hostID)
	if err != nil {
		return err
	}
	apiv2.WriteJSON(w, http.StatusOK, b.View())
	return nil
}

func (s *Service) deleteBMC(w http.ResponseWriter, r *http.Request, c *call) error {
	if err := s.o.Store.DeleteBMC(r.Context(), c.project, c.hostID); err != nil {
		return err
	}
	apiv2.WriteJSON(w, http.StatusOK, struct{}{}) // {}, as the v1 API's deletes
	return nil
}
