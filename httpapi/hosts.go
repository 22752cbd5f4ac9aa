package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
)

// The host and instance actions beyond CRUD: registration, onboarding,
// invalidation, and the host summary.

func (h *handler) registerHost(w http.ResponseWriter, r *http.Request, c *call) error {
	reg, err := h.decodeRegistration(r)
	if err != nil {
		return err
	}
	out, err := h.inv.RegisterHost(r.Context(), c.project, reg)
	if err != nil {
		return err
	}
	h.writeJSON(w, http.StatusOK, out)
	return nil
}

func (h *handler) updateRegistration(w http.ResponseWriter, r *http.Request, c *call) error {
	id, err := pathID(r, eim.KindHost)
	if err != nil {
		return err
	}
	reg, err := h.decodeRegistration(r)
	if err != nil {
		return err
	}
	out, err := h.inv.UpdateRegistration(r.Context(), c.project, id, reg)
	if err != nil {
		return err
	}
	h.writeJSON(w, http.StatusOK, out)
	return nil
}

func (h *handler) onboardHost(w http.ResponseWriter, r *http.Request, c *call) error {
	id, err := pathID(r, eim.KindHost)
	if err != nil {
		return err
	}
	if err := h.inv.OnboardHost(r.Context(), c.project, id); err != nil {
		return err
	}
	h.writeEmpty(w)
	return nil
}

func (h *handler) invalidateHost(w http.ResponseWriter, r *http.Request, c *call) error {
	id, err := pathID(r, eim.KindHost)
	if err != nil {
		return err
	}
	note := r.URL.Query().Get("note")
	if len(note) > 512 {
		return eim.Errorf(eim.EINVALID, "note: longer than 512 characters")
	}
	if err := h.inv.InvalidateHost(r.Context(), c.project, id, note); err != nil {
		return err
	}
	h.writeEmpty(w)
	return nil
}

func (h *handler) invalidateInstance(w http.ResponseWriter, r *http.Request, c *call) error {
	id, err := pathID(r, eim.KindInstance)
	if err != nil {
		return err
	}
	if err := h.inv.InvalidateInstance(r.Context(), c.project, id); err != nil {
		return err
	}
	h.writeEmpty(w)
	return nil
}

func (h *handler) hostSummary(w http.ResponseWriter, r *http.Request, c *call) error {
	sum, err := h.inv.HostSummary(r.Context(), c.project, r.URL.Query().Get("filter"))
	if err != nil {
		return err
	}
	h.writeJSON(w, http.StatusOK, sum)
	return nil
}

// decodeRegistration decodes a HostRegister body (camelCase or snake_case
// names; unknown names are a 400).
func (h *handler) decodeRegistration(r *http.Request) (inventory.HostRegistration, error) {
	var reg inventory.HostRegistration
	buf := getBuf()
	defer putBuf(buf)
	if err := h.readBody(r, buf); err != nil {
		return reg, err
	}
	err := decodeObject(buf.Bytes(), func(key string, raw json.RawMessage) error {
		switch key {
		case "name":
			return decodeString(key, raw, &reg.Name)
		case "serialNumber", "serial_number":
			return decodeString("serialNumber", raw, &reg.SerialNumber)
		case "uuid":
			return decodeString(key, raw, &reg.UUID)
		case "autoOnboard", "auto_onboard":
			return decodeBool("autoOnboard", raw, &reg.AutoOnboard)
		case "enableVpro", "enable_vpro":
			return decodeBool("enableVpro", raw, &reg.EnableVpro)
		case "userLvmSize", "user_lvm_size":
			var n uint64
			if err := decodeUint("userLvmSize", raw, 32, &n); err != nil {
				return err
			}
			reg.UserLvmSize = uint32(n)
			return nil
		}
		return eim.Errorf(eim.EINVALID, "unknown field %q", key)
	})
	return reg, err
}
