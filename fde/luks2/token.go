package luks2

import (
	"crypto/rand"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Tokens are the LUKS2 header's way to say where a keyslot's key comes
// from (systemd-cryptenroll's "systemd-tpm2" is one): a JSON object with a
// type, the keyslots it opens and members of the type's own. cryptsetup
// keeps tokens of types it does not know and shows them in luksDump. EIM
// keeps the TPM-sealed key of keyslot 0 in one, so the volume carries what
// unlocks it.

// Token is one token of a volume.
type Token struct {
	ID       int
	Type     string
	Keyslots []int
	// Fields are the token's other members, by name (strings, as AddToken
	// writes them; other JSON values as encoding/json decodes them).
	Fields map[string]any
}

// maxTokens is LUKS2's limit (LUKS2_TOKENS_MAX).
const maxTokens = 32

// AddToken adds a token of type typ for keyslots, with fields as its other
// members, to the volume on dev and returns its ID (the lowest free one).
// Types starting "luks2-" are cryptsetup's own and refused, as are keyslots
// the volume does not have.
func AddToken(dev Device, typ string, keyslots []int, fields map[string]string) (int, error) {
	if typ == "" || strings.HasPrefix(typ, "luks2-") || len(typ) > 64 {
		return 0, fmt.Errorf("luks2: token type %q: want 1 to 64 characters, not starting luks2-", typ)
	}
	h, err := ReadHeader(dev)
	if err != nil {
		return 0, err
	}
	slots := make([]any, 0, len(keyslots))
	for _, k := range keyslots {
		if _, ok := h.meta.Keyslots[strconv.Itoa(k)]; !ok {
			return 0, fmt.Errorf("luks2: token: the volume has no keyslot %d", k)
		}
		slots = append(slots, strconv.Itoa(k))
	}
	tok := map[string]any{"type": typ, "keyslots": slots}
	for k, v := range fields {
		if k == "type" || k == "keyslots" {
			return 0, fmt.Errorf("luks2: token field %q is the token's own", k)
		}
		tok[k] = v
	}
	if h.meta.Tokens == nil {
		h.meta.Tokens = map[string]any{}
	}
	id := 0
	for ; id < maxTokens; id++ {
		if _, ok := h.meta.Tokens[strconv.Itoa(id)]; !ok {
			break
		}
	}
	if id == maxTokens {
		return 0, fmt.Errorf("luks2: token: the volume has %d tokens already", maxTokens)
	}
	h.meta.Tokens[strconv.Itoa(id)] = tok
	h.Seqid++
	if err := writeHeaders(dev, h, rand.Reader); err != nil {
		return 0, err
	}
	return id, nil
}

// Tokens returns the volume's tokens, by ID. A token that is not an object
// with a type and a list of keyslot IDs is a *HeaderError naming it.
func (h *Header) Tokens() ([]Token, error) {
	var out []Token
	for name, v := range h.meta.Tokens {
		id, err := strconv.Atoi(name)
		field := "tokens." + name
		if err != nil || id < 0 {
			return nil, headerErr(field, "token ID %q is not a number", name)
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, headerErr(field, "not an object")
		}
		t := Token{ID: id, Fields: map[string]any{}}
		if t.Type, ok = m["type"].(string); !ok || t.Type == "" {
			return nil, headerErr(field+".type", "missing")
		}
		ks, ok := m["keyslots"].([]any)
		if !ok {
			return nil, headerErr(field+".keyslots", "not a list")
		}
		for _, k := range ks {
			s, _ := k.(string)
			n, err := strconv.Atoi(s)
			if err != nil || n < 0 {
				return nil, headerErr(field+".keyslots", "%v is not a keyslot ID", k)
			}
			t.Keyslots = append(t.Keyslots, n)
		}
		for k, v := range m {
			if k != "type" && k != "keyslots" {
				t.Fields[k] = v
			}
		}
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// FindToken returns the first token of type typ, or an error saying the
// volume has none.
func (h *Header) FindToken(typ string) (*Token, error) {
	ts, err := h.Tokens()
	if err != nil {
		return nil, err
	}
	for i := range ts {
		if ts[i].Type == typ {
			return &ts[i], nil
		}
	}
	return nil, errors.New("luks2: the volume has no " + typ + " token")
}
