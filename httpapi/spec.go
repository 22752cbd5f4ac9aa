package httpapi

import (
	"net/http"
	"strconv"

	"github.com/eimhq/eim/api"
)

// openapi serves the API's own OpenAPI document. It needs no token.
func (h *handler) openapi(w http.ResponseWriter, _ *http.Request) {
	spec := api.Spec()
	hd := w.Header()
	hd.Set("Content-Type", "application/yaml")
	hd.Set("Content-Length", strconv.Itoa(len(spec)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(spec)
}
