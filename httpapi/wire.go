package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/eimhq/eim"
)

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func getBuf() *bytes.Buffer {
	b := bufPool.Get().(*bytes.Buffer)
	b.Reset()
	return b
}

func putBuf(b *bytes.Buffer) {
	if b.Cap() <= 1<<20 { // don't keep huge buffers around
		bufPool.Put(b)
	}
}

// writeJSON encodes v once into a pooled buffer and writes it with its length.
func (h *handler) writeJSON(w http.ResponseWriter, status int, v any) {
	if r, ok := v.(eim.Resource); ok {
		new(emitRefs).resource(r)
	}
	buf := getBuf()
	defer putBuf(buf)
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only a bug in a domain type gets here.
		h.noteEncodeFailure(w, err)
		buf.Reset()
		buf.WriteString(`{"code":"Internal","message":"internal error"}`)
		status = http.StatusInternalServerError
	}
	h.writeBytes(w, status, buf.Bytes())
}

// noteEncodeFailure hands an encoding failure to ServeHTTP, which logs
// and counts it with the request's route once the handler has returned;
// a writer not of ServeHTTP (a test's) gets it logged here.
func (h *handler) noteEncodeFailure(w http.ResponseWriter, err error) {
	for {
		switch x := w.(type) {
		case *statusWriter:
			x.encodeErr = err
			return
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
			continue
		}
		h.log.Error("encode response", "err", err)
		return
	}
}

func (h *handler) writeBytes(w http.ResponseWriter, status int, b []byte) {
	hd := w.Header()
	hd.Set("Content-Type", "application/json")
	hd.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// writeEmpty answers the operations whose response is an empty message.
func (h *handler) writeEmpty(w http.ResponseWriter) {
	h.writeBytes(w, http.StatusOK, []byte("{}\n"))
}

// writeList writes the list envelope {"<plural>":[…],"totalElements":N,"hasNext":b}.
func (h *handler) writeList(w http.ResponseWriter, plural string, items []eim.Resource, total int, hasNext bool) {
	buf := getBuf()
	defer putBuf(buf)
	buf.WriteString(`{"`)
	buf.WriteString(plural)
	buf.WriteString(`":`)
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if items == nil {
		items = []eim.Resource{}
	}
	refs := new(emitRefs)
	for _, r := range items {
		refs.resource(r)
	}
	if err := enc.Encode(items); err != nil {
		h.noteEncodeFailure(w, err)
		h.writeBytes(w, http.StatusInternalServerError, []byte(`{"code":"Internal","message":"internal error"}`))
		return
	}
	buf.Truncate(buf.Len() - 1) // Encode's newline
	buf.WriteString(`,"totalElements":`)
	buf.WriteString(strconv.Itoa(total))
	buf.WriteString(`,"hasNext":`)
	buf.WriteString(strconv.FormatBool(hasNext))
	buf.WriteString("}\n")
	h.writeBytes(w, http.StatusOK, buf.Bytes())
}

// readBody reads the request body within the size limit.
func (h *handler) readBody(r *http.Request, buf *bytes.Buffer) error {
	if r.ContentLength > h.maxBody {
		return eim.Errorf(eim.ETOOLARGE, "request body is larger than %d bytes", h.maxBody)
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(nil, r.Body, h.maxBody))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return eim.Errorf(eim.ETOOLARGE, "request body is larger than %d bytes", h.maxBody)
	case err != nil && !errors.Is(err, io.EOF):
		return eim.Errorf(eim.EINVALID, "reading request body: %v", err)
	}
	if buf.Len() > 0 {
		return checkJSONType(r.Header.Get("Content-Type"))
	}
	return nil
}

// checkJSONType refuses a body that does not say it is JSON: the
// Content-Type must be application/json, with parameters or not
// ("application/json; charset=utf-8"). A missing one is refused too, so
// that a client's mistake (curl -d sends a form type; a form is not JSON)
// is told rather than guessed.
func checkJSONType(ct string) error {
	if ct == "" {
		return eim.Errorf(codeMediaType, "request body without Content-Type: send it as application/json")
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil || mt != "application/json" {
		return eim.Errorf(codeMediaType, "Content-Type %q: send the request body as application/json", truncate(ct, 64))
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return eim.Errorf(codeMediaType, "Content-Type charset %q: send the request body as application/json in UTF-8", truncate(cs, 64))
	}
	return nil
}
