package luks2

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Token is a LUKS2 token: metadata in the header that names keyslots and
// says how to get their key (systemd keeps its TPM2 blobs so). cryptsetup
// keeps tokens it does not know and shows them in luksDump. A token is a
// JSON object with a type, its keyslots and fields of its program's own
// (systemd's "tpm2-blob", …: AddTokenFields); tokens of EIM's own keep
// Data in the field "eim_data" (base64: AddToken).
type Token struct {
	ID       int
	Type     string
	Keyslots []int
	Data     []byte         // eim_data; nil for a token of another program
	Fields   map[string]any // every field but type and keyslots, as encoding/json decodes them (numbers are float64)
}

const tokenDataField = "eim_data"

// AddToken adds a token of type typ for keyslots with data (in eim_data)
// to the volume on dev, and returns its ID. It needs no key: tokens are
// not secret.
func AddToken(dev Device, typ string, keyslots []int, data []byte) (int, error) {
	return AddTokenFields(dev, typ, keyslots, map[string]any{tokenDataField: base64.StdEncoding.EncodeToString(data)})
}

// AddTokenFields adds a token of type typ (e.g. "systemd-tpm2") for
// keyslots with fields (JSON values; not "type" nor "keyslots") to the
// volume on dev, and returns its ID.
func AddTokenFields(dev Device, typ string, keyslots []int, fields map[string]any) (int, error) {
	if typ == "" || strings.HasPrefix(typ, "luks2-") || len(typ) > 64 {
		return 0, fmt.Errorf("luks2: token type %q: want 1 to 64 bytes, not starting luks2- (cryptsetup's own)", typ)
	}
	h, err := ReadHeader(dev)
	if err != nil {
		return 0, err
	}
	slots := []string{}
	for _, k := range keyslots {
		name := strconv.Itoa(k)
		if h.meta.Keyslots[name] == nil {
			return 0, fmt.Errorf("luks2: token keyslots: keyslot %d does not exist", k)
		}
		slots = append(slots, name)
	}
	id := -1
	for i := 0; i < maxTokens; i++ {
		if _, used := h.meta.Tokens[strconv.Itoa(i)]; !used {
			id = i
			break
		}
	}
	if id < 0 {
		return 0, fmt.Errorf("luks2: all %d tokens are in use", maxTokens)
	}
	if h.meta.Tokens == nil {
		h.meta.Tokens = map[string]any{}
	}
	obj := map[string]any{}
	for k, v := range fields {
		if k == "type" || k == "keyslots" {
			return 0, fmt.Errorf("luks2: token field %q: set by the token's type and keyslots", k)
		}
		obj[k] = v
	}
	obj["type"], obj["keyslots"] = typ, slots
	h.meta.Tokens[strconv.Itoa(id)] = obj
	h.Seqid++
	if err := writeHeaders(dev, h, rand.Reader); err != nil {
		return 0, err
	}
	return id, nil
}

// maxTokens is LUKS2's limit.
const maxTokens = 32

// parseTokens reads the tokens of the JSON area (validate calls it).
func (h *Header) parseTokens() error {
	h.Tokens = nil
	for name, v := range h.meta.Tokens {
		field := "tokens." + name
		id, err := strconv.Atoi(name)
		if err != nil || id < 0 || id >= maxTokens || strconv.Itoa(id) != name {
			return headerErr("tokens", "token ID %q: want 0 to %d", name, maxTokens-1)
		}
		obj, ok := v.(map[string]any)
		if !ok {
			return headerErr(field, "not an object")
		}
		typ, ok := obj["type"].(string)
		if !ok || typ == "" {
			return headerErr(field+".type", "missing or not a string")
		}
		list, ok := obj["keyslots"].([]any)
		if !ok {
			return headerErr(field+".keyslots", "missing or not an array")
		}
		t := Token{ID: id, Type: typ, Fields: map[string]any{}}
		for k, v := range obj {
			if k != "type" && k != "keyslots" {
				t.Fields[k] = v
			}
		}
		for _, k := range list {
			s, ok := k.(string)
			n, err := strconv.Atoi(s)
			if !ok || err != nil || h.meta.Keyslots[s] == nil {
				return headerErr(field+".keyslots", "%v is not a keyslot of the volume", k)
			}
			t.Keyslots = append(t.Keyslots, n)
		}
		if d, present := obj[tokenDataField]; present {
			s, ok := d.(string)
			b, err := base64.StdEncoding.DecodeString(s)
			if !ok || err != nil {
				return headerErr(field+"."+tokenDataField, "not base64")
			}
			t.Data = b
		}
		h.Tokens = append(h.Tokens, t)
	}
	sort.Slice(h.Tokens, func(i, j int) bool { return h.Tokens[i].ID < h.Tokens[j].ID })
	return nil
}

// Token returns the first token of type typ, or false.
func (h *Header) Token(typ string) (Token, bool) {
	for _, t := range h.Tokens {
		if t.Type == typ {
			return t, true
		}
	}
	return Token{}, false
}

// RemoveToken removes token id from the volume on dev (when its keyslot is
// replaced).
func RemoveToken(dev Device, id int) error {
	h, err := ReadHeader(dev)
	if err != nil {
		return err
	}
	name := strconv.Itoa(id)
	if _, ok := h.meta.Tokens[name]; !ok {
		return fmt.Errorf("luks2: token %d: no such token", id)
	}
	delete(h.meta.Tokens, name)
	h.Seqid++
	return writeHeaders(dev, h, rand.Reader)
}
