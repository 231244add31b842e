package v1beta1_test

import (
	"fmt"
	"reflect"
	"runtime"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kruntime "k8s.io/apimachinery/pkg/runtime"

	"github.com/cocoonstack/sandbox-operator/src/apis/nodeinventory/v1beta1"
)

// reporter is the part of *testing.T the checks use, so that a check can
// also run against a recorder to prove it fails when it should.
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
	Fatal(args ...any)
}

const deepcopyHint = "zz_generated.deepcopy.go no longer matches the Go types: run tools/codegen.sh and commit the result"

// populator writes a deterministic, non-zero value derived from seed into
// every exported field reachable from a value. With inPlace it reuses the
// pointers, slices and maps already there instead of allocating new ones, so
// writing through a copy that shares memory with its original also changes
// the original: that is how aliasing left by a stale deepcopy shows up.
type populator struct {
	t       reporter
	seed    int
	inPlace bool
	counter int
}

func (p *populator) next() int {
	p.counter++
	return p.seed*1000 + p.counter
}

func (p *populator) populate(v reflect.Value, path string) {
	p.t.Helper()
	if v.Type() == metaTimeType {
		// metav1.Time wraps a time.Time with unexported fields; set it whole.
		v.Set(reflect.ValueOf(timeValue(p.next())))
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("%s-%d", path, p.seed))
	case reflect.Bool:
		v.SetBool(p.seed%2 == 1)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(int64(p.next()%127) + 1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(uint64(p.next()%127) + 1)
	case reflect.Pointer:
		if !p.inPlace {
			v.Set(reflect.New(v.Type().Elem()))
		}
		if v.IsNil() {
			p.t.Fatalf("%s: nil pointer where the original had a value", path)
		}
		p.populate(v.Elem(), path)
	case reflect.Slice:
		if !p.inPlace {
			v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		}
		for i := range v.Len() {
			p.populate(v.Index(i), fmt.Sprintf("%s[%d]", path, i))
		}
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			p.t.Fatalf("%s: map key %s not supported; extend populate", path, v.Type().Key())
		}
		if !p.inPlace {
			v.Set(reflect.MakeMap(v.Type()))
			for i := range 2 {
				v.SetMapIndex(reflect.ValueOf(fmt.Sprintf("key%d", i)).Convert(v.Type().Key()), reflect.Zero(v.Type().Elem()))
			}
		}
		for _, k := range v.MapKeys() {
			elem := reflect.New(v.Type().Elem()).Elem()
			p.populate(elem, fmt.Sprintf("%s[%s]", path, k))
			v.SetMapIndex(k, elem)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			f := v.Type().Field(i)
			if !f.IsExported() {
				continue
			}
			p.populate(v.Field(i), path+"."+f.Name)
		}
	default:
		p.t.Fatalf("%s: kind %s not supported; extend populate", path, v.Kind())
	}
}

func timeValue(n int) metav1.Time {
	return metav1.NewTime(time.Date(2026, 1, 1, 0, 0, n, 0, time.UTC))
}

// filled returns a new *T with every reachable field set from seed.
func filled[T any](t reporter, seed int) *T {
	t.Helper()
	out := new(T)
	(&populator{t: t, seed: seed}).populate(reflect.ValueOf(out).Elem(), reflect.TypeFor[T]().Name())
	return out
}

// assertNoZeroLeaves guards the populator itself: a field it silently left
// empty could not reveal a missing deep copy.
func assertNoZeroLeaves(t reporter, v reflect.Value, path string) {
	t.Helper()
	if v.Type() == metaTimeType {
		if v.IsZero() {
			t.Errorf("%s was left zero by the populator", path)
		}
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			t.Errorf("%s was left nil by the populator", path)
			return
		}
		assertNoZeroLeaves(t, v.Elem(), path)
	case reflect.Slice, reflect.Map:
		if v.Len() == 0 {
			t.Errorf("%s was left empty by the populator", path)
		}
		if v.Kind() == reflect.Slice {
			for i := range v.Len() {
				assertNoZeroLeaves(t, v.Index(i), fmt.Sprintf("%s[%d]", path, i))
			}
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				assertNoZeroLeaves(t, v.Field(i), path+"."+v.Type().Field(i).Name)
			}
		}
	default:
		if v.IsZero() {
			t.Errorf("%s was left zero by the populator", path)
		}
	}
}

// checkDeepCopy asserts that copyOf(orig) equals orig and shares no memory
// with it: rewriting every reachable field of the copy in place must leave
// the original untouched.
func checkDeepCopy[T any](t reporter, copyOf func(*T) *T) {
	t.Helper()
	orig := filled[T](t, 1)
	assertNoZeroLeaves(t, reflect.ValueOf(orig).Elem(), reflect.TypeFor[T]().Name())
	want := filled[T](t, 1)

	cp := copyOf(orig)
	if cp == orig {
		t.Fatalf("DeepCopy returned its receiver; %s", deepcopyHint)
	}
	if !reflect.DeepEqual(cp, orig) || !equality.Semantic.DeepEqual(cp, orig) {
		t.Fatalf("DeepCopy differs from its original; %s", deepcopyHint)
	}

	(&populator{t: t, seed: 2, inPlace: true}).populate(reflect.ValueOf(cp).Elem(), reflect.TypeFor[T]().Name())
	if reflect.DeepEqual(cp, want) {
		t.Fatal("rewriting the copy changed nothing; the aliasing check would prove nothing")
	}
	if !reflect.DeepEqual(orig, want) {
		t.Fatalf("writing through the copy changed the original, so the copy shares memory with it; %s", deepcopyHint)
	}
}

func TestNodeInventoryDeepCopyIsDeep(t *testing.T) {
	checkDeepCopy(t, (*v1beta1.NodeInventory).DeepCopy)
}

func TestNodeInventoryListDeepCopyIsDeep(t *testing.T) {
	checkDeepCopy(t, (*v1beta1.NodeInventoryList).DeepCopy)
}

func TestDeepCopyObjectIsDeep(t *testing.T) {
	checkDeepCopy(t, func(in *v1beta1.NodeInventory) *v1beta1.NodeInventory {
		return in.DeepCopyObject().(*v1beta1.NodeInventory)
	})
	checkDeepCopy(t, func(in *v1beta1.NodeInventoryList) *v1beta1.NodeInventoryList {
		return in.DeepCopyObject().(*v1beta1.NodeInventoryList)
	})
}

func TestDeepCopyOfNil(t *testing.T) {
	var inv *v1beta1.NodeInventory
	if inv.DeepCopy() != nil {
		t.Error("DeepCopy of a nil NodeInventory is not nil")
	}
	var list *v1beta1.NodeInventoryList
	if list.DeepCopy() != nil {
		t.Error("DeepCopy of a nil NodeInventoryList is not nil")
	}
}

// TestShallowCopyIsCaught proves the aliasing check can fail: a plain struct
// assignment, which is what a deepcopy function misses for a field added
// without regenerating, must be reported.
func TestShallowCopyIsCaught(t *testing.T) {
	inner := &recorder{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// A failing check stops its goroutine the way t.Fatal does, so it
		// runs in a goroutine of its own.
		checkDeepCopy(inner, func(in *v1beta1.NodeInventory) *v1beta1.NodeInventory {
			out := *in
			return &out
		})
	}()
	<-done
	if len(inner.failures) == 0 {
		t.Fatal("a shallow copy passed the deepcopy check")
	}
	t.Logf("shallow copy reported as: %s", inner.failures[0])
}

// recorder is a reporter that collects failures instead of failing a test.
type recorder struct {
	failures []string
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.failures = append(r.failures, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Fatal(args ...any) {
	r.failures = append(r.failures, fmt.Sprint(args...))
	runtime.Goexit()
}

var (
	_ kruntime.Object = (*v1beta1.NodeInventory)(nil)
	_ kruntime.Object = (*v1beta1.NodeInventoryList)(nil)
)
