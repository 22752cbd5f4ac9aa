package httpapi

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"

	"github.com/eimhq/eim"
	"github.com/eimhq/eim/inventory"
)

// The original's metadata broker, which its web UI reaches at
// /v1/projects/{projectName}/metadata: GET the label keys and values the
// project uses (suggestions), POST {"metadata":[{"key","value"}]} the
// labels of what it saves, DELETE ?key=&value= a posted one. Each answers
// {"metadata":[{"key","values":[…]}]}, the broker's MetadataResponse.
// Reads need a role on the project, changes the project's _im-rw role.

type metadataResponse struct {
	Metadata []inventory.LabelValues `json:"metadata"`
}

func (h *handler) metadataRoutes() {
	h.handle("GET /metadata", h.getMetadata)
	h.handle("POST /metadata", h.postMetadata)
	h.handle("DELETE /metadata", h.deleteMetadata)
}

func (h *handler) getMetadata(w http.ResponseWriter, r *http.Request, c *call) error {
	return h.writeMetadata(w, r, c)
}

func (h *handler) writeMetadata(w http.ResponseWriter, r *http.Request, c *call) error {
	md, err := h.inv.MetadataSuggestions(r.Context(), c.project)
	if err != nil {
		return err
	}
	h.writeJSON(w, http.StatusOK, metadataResponse{Metadata: md})
	return nil
}

func (h *handler) postMetadata(w http.ResponseWriter, r *http.Request, c *call) error {
	buf := getBuf()
	defer putBuf(buf)
	if err := h.readBody(r, buf); err != nil {
		return err
	}
	pairs, err := decodeMetadataList(buf.Bytes())
	if err != nil {
		return err
	}
	if err := h.inv.RecordMetadata(r.Context(), c.project, pairs); err != nil {
		return err
	}
	return h.writeMetadata(w, r, c)
}

func (h *handler) deleteMetadata(w http.ResponseWriter, r *http.Request, c *call) error {
	q := r.URL.Query()
	if err := h.inv.ForgetMetadata(r.Context(), c.project, eim.MetadataItem{Key: q.Get("key"), Value: q.Get("value")}); err != nil {
		return err
	}
	return h.writeMetadata(w, r, c)
}

// decodeMetadataList decodes the broker's MetadataList:
// {"metadata":[{"key":…,"value":…}]}, metadata required; unknown members
// are 400.
func decodeMetadataList(body []byte) ([]eim.MetadataItem, error) {
	var (
		out  []eim.MetadataItem
		seen bool
	)
	err := decodeObject(body, func(key string, raw json.RawMessage) error {
		if key != "metadata" {
			return eim.Errorf(eim.EINVALID, "unknown field %q", key)
		}
		if seen {
			return eim.Errorf(eim.EINVALID, "field %q is given twice", key)
		}
		seen = true
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			return eim.Errorf(eim.EINVALID, "metadata: want a list of {\"key\", \"value\"}")
		}
		out = make([]eim.MetadataItem, 0, len(items))
		for i, item := range items {
			field := "metadata[" + strconv.Itoa(i) + "]"
			if len(item) == 0 || item[0] != '{' {
				return eim.Errorf(eim.EINVALID, "%s: want an object {\"key\", \"value\"}", field)
			}
			var it eim.MetadataItem
			var have []string
			err := decodeObject(item, func(k string, v json.RawMessage) error {
				if slices.Contains(have, k) {
					return eim.Errorf(eim.EINVALID, "%s.%s: given twice", field, k)
				}
				have = append(have, k)
				switch k {
				case "key":
					return decodeString(field+".key", v, &it.Key)
				case "value":
					return decodeString(field+".value", v, &it.Value)
				}
				return eim.Errorf(eim.EINVALID, "unknown field %q", field+"."+k)
			})
			if err != nil {
				return err
			}
			out = append(out, it)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if !seen {
		return nil, eim.Errorf(eim.EINVALID, "metadata: is required")
	}
	return out, nil
}
