// Runs an Argo CD resource health script the way Argo CD runs it (argo-cd util/lua:
// gopher-lua with only the package, base and table libraries opened, the object as the
// global `obj`, the returned table read as {status, message}), so the scripts
// tollgate ships are tested on the interpreter Argo CD embeds.
// Usage: argocd-lua SCRIPT.lua < OBJECT.json; prints the health as JSON.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"

	lua "github.com/yuin/gopher-lua"
)

var healthCodes = map[string]bool{
	"Healthy": true, "Progressing": true, "Degraded": true,
	"Suspended": true, "Missing": true, "Unknown": true,
}

func main() {
	if len(os.Args) != 2 {
		fail("usage: argocd-lua SCRIPT.lua < OBJECT.json")
	}
	script, err := os.ReadFile(os.Args[1])
	if err != nil {
		fail(err.Error())
	}
	var obj map[string]any
	if err := json.NewDecoder(os.Stdin).Decode(&obj); err != nil {
		fail("object: " + err.Error())
	}
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{{lua.LoadLibName, lua.OpenPackage}, {lua.BaseLibName, lua.OpenBase}, {lua.TabLibName, lua.OpenTable}} {
		l.Push(l.NewFunction(lib.open))
		l.Push(lua.LString(lib.name))
		l.Call(1, 0)
	}
	l.SetGlobal("obj", decode(l, obj))
	if err := l.DoString(string(script)); err != nil {
		fail("script: " + err.Error())
	}
	result := l.Get(-1)
	table, ok := result.(*lua.LTable)
	if !ok {
		fail(fmt.Sprintf("script returned %s, not a table", result.Type()))
	}
	health := map[string]string{}
	table.ForEach(func(k, v lua.LValue) { health[k.String()] = v.String() })
	if !healthCodes[health["status"]] {
		fail(fmt.Sprintf("script returned status %q, not an Argo CD health status", health["status"]))
	}
	out, _ := json.Marshal(health)
	fmt.Println(string(out))
}

// decode turns a JSON value into Lua values as Argo CD's decodeValue does: objects and
// arrays become tables (arrays 1-based), numbers LNumber, strings, booleans, null nil.
func decode(l *lua.LState, value any) lua.LValue {
	switch v := value.(type) {
	case map[string]any:
		t := l.NewTable()
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			t.RawSetString(k, decode(l, v[k]))
		}
		return t
	case []any:
		t := l.NewTable()
		for i, item := range v {
			t.RawSetInt(i+1, decode(l, item))
		}
		return t
	case float64:
		return lua.LNumber(v)
	case string:
		return lua.LString(v)
	case bool:
		return lua.LBool(v)
	default:
		return lua.LNil
	}
}

func fail(message string) {
	fmt.Fprintln(os.Stderr, "argocd-lua: "+message)
	os.Exit(2)
}
