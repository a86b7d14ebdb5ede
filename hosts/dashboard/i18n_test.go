package dashboard

import (
	"encoding/json"
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Every language has every message of the default one, with the same
// placeholders, and every message key the templates name exists.
func TestMessages_EveryLanguageComplete_EveryTemplateKeyExists(t *testing.T) {
	c, err := loadCatalogue("en")
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"en", "de", "es", "fr", "pt"}, c.order)
	ph := regexp.MustCompile(`\{\d\}`)
	raw, err := loadRaw()
	require.NoError(t, err)
	for lang, m := range raw {
		for k, v := range raw["en"] {
			got, ok := m[k]
			require.True(t, ok, "%s lacks %q", lang, k)
			require.ElementsMatch(t, ph.FindAllString(v, -1), ph.FindAllString(got, -1), "%s %q placeholders", lang, k)
		}
	}
	key := regexp.MustCompile(`\.L\.T "([a-z_]+)"`)
	names, err := fs.Glob(files, "templates/*.html")
	require.NoError(t, err)
	for _, n := range names {
		b, err := fs.ReadFile(files, n)
		require.NoError(t, err)
		for _, m := range key.FindAllStringSubmatch(string(b), -1) {
			_, ok := raw["en"][m[1]]
			require.True(t, ok, "%s names %q", n, m[1])
		}
	}
	for _, s := range []string{"PENDING", "PAID", "CONFIRMED", "SETTLED", "EXPIRED"} {
		require.Contains(t, raw["en"], "status_"+s)
	}
	require.True(t, slices.Contains(c.order, "de"))
}

func TestLocale_NumbersAndDates(t *testing.T) {
	c, err := loadCatalogue("en")
	require.NoError(t, err)
	require.Equal(t, "1,234.5", c.locale("en").Num("1234.5"))
	require.Equal(t, "1.234,5", c.locale("de").Num("1234.5"))
	require.Equal(t, "1\u202f234,5", c.locale("fr").Num("1234.5"))
	require.Equal(t, "0,000000000000000001", c.locale("pt").Num("0.000000000000000001"), "exact digits")
	require.Equal(t, "123", c.locale("es").Num("123"))
}

// loadRaw reads every catalogue as written (not completed), for tests.
func loadRaw() (map[string]map[string]string, error) {
	out := map[string]map[string]string{}
	ents, err := fs.ReadDir(files, "messages")
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		b, err := fs.ReadFile(files, "messages/"+e.Name())
		if err != nil {
			return nil, err
		}
		m := map[string]string{}
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, err
		}
		out[strings.TrimSuffix(e.Name(), ".json")] = m
	}
	return out, nil
}
