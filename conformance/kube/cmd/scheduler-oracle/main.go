// Command scheduler-oracle places pods with the real kube-scheduler framework, in-process.
//
// It reads the same inputs `kgpu simulate` reads for a plain cluster (JSON files holding a v1 List,
// or single objects, of Nodes, Pods and PriorityClasses): pods with spec.nodeName are bound, the
// others pending. It builds the default scheduler profile from the in-tree plugin registry, puts
// nodes and bound pods into the scheduler cache, and schedules the pending pods one at a time in
// kgpu's queue order (priority descending, then input order). Each placement is added to the cache
// before the next pod, as a bind would.
//
// Determinism: every node is filtered (no percentageOfNodesToScore sampling) and score ties go to
// the node whose name sorts first, where the real scheduler picks at random among ties. Filters run
// without nominated pods. A pod that fits no node runs the PostFilter plugins (DefaultPreemption, with
// SchedulerAsyncPreemption off so that its evictions happen in line) and its message carries their
// "preemption:" part, as the FailedScheduling event does; the pods are in the fake clientset its pod lister
// reads, after the Priority admission plugin's part (priority and preemptionPolicy from the PriorityClass).
// A pod preemption nominates stays unschedulable in the output.
//
// Volumes: PersistentVolumeClaims, PersistentVolumes and StorageClasses in the inputs are served to the
// plugins (VolumeRestrictions, VolumeBinding, VolumeZone) through a fake clientset. The PV controller and
// the provisioners are not the scheduler, so after each placement the oracle does their part for the pod's
// WaitForFirstConsumer claims as a running cluster would before the next pod: an Available volume that
// FindMatchingVolume (component-helpers, the PV controller's own matcher) picks on the chosen node is bound,
// else the class's provisioner creates one (ebs.csi.aws.com: in the node's topology.kubernetes.io/zone;
// others: no topology); the plugins then see the new state (the framework is built again over it).
//
// Output: one JSON object per pending pod, one per line: {"pod":"ns/name","node":"..."} or
// {"pod":"ns/name","message":"0/3 nodes are available: ..."}. With ORACLE_DEBUG set, every node's
// plugin scores go to stderr.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/events"
	storagehelpers "k8s.io/component-helpers/storage/volume"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	corev1defaults "k8s.io/kubernetes/pkg/apis/core/v1"
	storagev1defaults "k8s.io/kubernetes/pkg/apis/storage/v1"
	config "k8s.io/kubernetes/pkg/scheduler/apis/config"
	"k8s.io/kubernetes/pkg/scheduler/apis/config/latest"
	internalcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	internalqueue "k8s.io/kubernetes/pkg/scheduler/backend/queue"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	"k8s.io/kubernetes/pkg/scheduler/metrics"
)

type result struct {
	Pod     string `json:"pod"`
	Node    string `json:"node,omitempty"`
	Message string `json:"message,omitempty"`
}

type inputs struct {
	nodes     []*v1.Node
	bound     []*v1.Pod
	pending   []*v1.Pod
	classes   map[string]int32
	policies  map[string]*v1.PreemptionPolicy // the PriorityClasses' preemptionPolicy
	defaultPr int32
	defaultPC string
	claims    []*v1.PersistentVolumeClaim
	volumes   []*v1.PersistentVolume
	storage   []*storagev1.StorageClass
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: scheduler-oracle FILE.json [FILE.json...]")
		os.Exit(2)
	}
	// preemption's evictions run in line (the dry run and its message are the same either way), so that
	// nothing happens behind the oracle's back between two pods
	if err := feature.DefaultMutableFeatureGate.SetFromMap(map[string]bool{"SchedulerAsyncPreemption": false}); err != nil {
		fail(err)
	}
	in := &inputs{classes: map[string]int32{}, policies: map[string]*v1.PreemptionPolicy{}}
	scheme := runtime.NewScheme()
	if err := corev1defaults.AddToScheme(scheme); err != nil {
		fail(err)
	}
	if err := storagev1defaults.AddToScheme(scheme); err != nil {
		fail(err)
	}
	for _, path := range os.Args[1:] {
		if err := in.read(path, scheme); err != nil {
			fail(fmt.Errorf("%s: %w", path, err))
		}
	}
	results, err := schedule(in)
	if err != nil {
		fail(err)
	}
	enc := json.NewEncoder(os.Stdout)
	for _, r := range results {
		if err := enc.Encode(r); err != nil {
			fail(err)
		}
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "scheduler-oracle:", err)
	os.Exit(2)
}

// read takes a v1 List or a single object.
func (in *inputs) read(path string, scheme *runtime.Scheme) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var doc struct {
		Kind  string            `json:"kind"`
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return err
	}
	items := doc.Items
	if doc.Kind != "List" {
		items = []json.RawMessage{data}
	}
	for _, raw := range items {
		var meta struct {
			Kind string `json:"kind"`
		}
		if err := json.Unmarshal(raw, &meta); err != nil {
			return err
		}
		switch meta.Kind {
		case "Node":
			n := &v1.Node{}
			if err := json.Unmarshal(raw, n); err != nil {
				return err
			}
			scheme.Default(n)
			in.nodes = append(in.nodes, n)
		case "Pod":
			p := &v1.Pod{}
			if err := json.Unmarshal(raw, p); err != nil {
				return err
			}
			if p.Namespace == "" {
				p.Namespace = "default"
			}
			if p.UID == "" {
				p.UID = types.UID("uid-" + p.Namespace + "-" + p.Name)
			}
			scheme.Default(p)
			if p.Spec.NodeName != "" {
				in.bound = append(in.bound, p)
			} else {
				in.pending = append(in.pending, p)
			}
		case "PriorityClass":
			pc := &schedulingv1.PriorityClass{}
			if err := json.Unmarshal(raw, pc); err != nil {
				return err
			}
			in.classes[pc.Name] = pc.Value
			in.policies[pc.Name] = pc.PreemptionPolicy
			if pc.GlobalDefault {
				in.defaultPr = pc.Value
				in.defaultPC = pc.Name
			}
		case "PersistentVolumeClaim":
			c := &v1.PersistentVolumeClaim{}
			if err := json.Unmarshal(raw, c); err != nil {
				return err
			}
			if c.Namespace == "" {
				c.Namespace = "default"
			}
			scheme.Default(c)
			in.claims = append(in.claims, c)
		case "PersistentVolume":
			pv := &v1.PersistentVolume{}
			if err := json.Unmarshal(raw, pv); err != nil {
				return err
			}
			scheme.Default(pv)
			in.volumes = append(in.volumes, pv)
		case "StorageClass":
			sc := &storagev1.StorageClass{}
			if err := json.Unmarshal(raw, sc); err != nil {
				return err
			}
			scheme.Default(sc)
			in.storage = append(in.storage, sc)
		default:
			return fmt.Errorf("kind %q is not read by the oracle", meta.Kind)
		}
	}
	return nil
}

// priority resolves spec.priority the way the Priority admission plugin does.
// priority does the Priority admission plugin's part: the pod's priority and, where the pod sets none, its
// preemptionPolicy from its PriorityClass (the global default's for a pod naming none).
func (in *inputs) priority(p *v1.Pod) int32 {
	class := p.Spec.PriorityClassName
	if class == "" {
		class = in.defaultPC
	}
	if p.Spec.PreemptionPolicy == nil {
		if policy := in.policies[class]; policy != nil {
			v := *policy
			p.Spec.PreemptionPolicy = &v
		}
	}
	if p.Spec.Priority != nil {
		return *p.Spec.Priority
	}
	v := in.defaultPr
	if c, ok := in.classes[p.Spec.PriorityClassName]; ok {
		v = c
	}
	p.Spec.Priority = &v
	return v
}

func schedule(in *inputs) ([]result, error) {
	metrics.Register()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logger := klog.FromContext(ctx)

	cfg, err := latest.Default()
	if err != nil {
		return nil, err
	}
	profile := &cfg.Profiles[0]
	pct := int32(100)
	profile.PercentageOfNodesToScore = &pct

	// admission's part first: the pod lister preemption reads holds the pods as the API server stored them
	for _, p := range in.bound {
		in.priority(p)
	}
	for _, p := range in.pending {
		in.priority(p)
	}
	cache := internalcache.New(ctx, 0, nil)
	snapshot := internalcache.NewEmptySnapshot()
	f, stop, err := in.framework(ctx, profile, snapshot)
	if err != nil {
		return nil, err
	}
	defer func() { stop() }()

	for _, n := range in.nodes {
		cache.AddNode(logger, n)
	}
	for _, p := range in.bound {
		in.priority(p)
		if err := cache.AddPod(logger, p); err != nil {
			return nil, err
		}
	}
	queue := append([]*v1.Pod(nil), in.pending...)
	for _, p := range queue {
		in.priority(p)
	}
	sort.SliceStable(queue, func(i, j int) bool { return *queue[i].Spec.Priority > *queue[j].Spec.Priority })

	out := make([]result, 0, len(queue))
	for _, pod := range queue {
		if err := cache.UpdateSnapshot(logger, snapshot); err != nil {
			return nil, err
		}
		r := result{Pod: pod.Namespace + "/" + pod.Name}
		host, msg, err := scheduleOne(ctx, f, snapshot, pod)
		if err != nil {
			return nil, fmt.Errorf("pod %s: %w", r.Pod, err)
		}
		if host == "" {
			r.Message = msg
		} else {
			r.Node = host
			bound := pod.DeepCopy()
			bound.Spec.NodeName = host
			if err := cache.AddPod(logger, bound); err != nil {
				return nil, err
			}
			if in.bindClaims(pod, in.node(host)) {
				stop()
				if f, stop, err = in.framework(ctx, profile, snapshot); err != nil {
					return nil, err
				}
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// framework builds the default profile over a fake clientset holding the storage objects as they are now.
func (in *inputs) framework(ctx context.Context, profile *config.KubeSchedulerProfile, snapshot *internalcache.Snapshot) (framework.Framework, func(), error) {
	ctx, cancel := context.WithCancel(ctx)
	var objs []runtime.Object
	for _, c := range in.claims {
		objs = append(objs, c)
	}
	for _, pv := range in.volumes {
		objs = append(objs, pv)
	}
	for _, sc := range in.storage {
		objs = append(objs, sc)
	}
	// DefaultPreemption's PostFilter reads the pods through the pod lister, and evicts through the client
	for _, p := range in.pending {
		objs = append(objs, p)
	}
	for _, p := range in.bound {
		objs = append(objs, p)
	}
	client := fake.NewSimpleClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	f, err := frameworkruntime.NewFramework(ctx, plugins.NewInTreeRegistry(), profile,
		frameworkruntime.WithClientSet(client),
		frameworkruntime.WithInformerFactory(factory),
		frameworkruntime.WithSnapshotSharedLister(snapshot),
		frameworkruntime.WithParallelism(1),
		// preemption's dry run filters with nominated pods (an empty queue nominates none); an eviction
		// records a Preempted event (dropped)
		frameworkruntime.WithPodNominator(internalqueue.NewSchedulingQueue(nil, factory)),
		frameworkruntime.WithWaitingPods(frameworkruntime.NewWaitingPodsMap()),
		frameworkruntime.WithEventRecorder(&events.FakeRecorder{}),
	)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	if len(objs) > 0 {
		// the volume binder's assume caches fill from their own informer handlers, just after the sync
		time.Sleep(30 * time.Millisecond)
	}
	return f, cancel, nil
}

func (in *inputs) node(name string) *v1.Node {
	for _, n := range in.nodes {
		if n.Name == name {
			return n
		}
	}
	return nil
}

// bindClaims does the PV controller's and the provisioner's part for a pod just placed on node: its
// WaitForFirstConsumer claims bind there. Reports whether anything changed.
func (in *inputs) bindClaims(pod *v1.Pod, node *v1.Node) bool {
	changed := false
	chosen := map[string]*v1.PersistentVolume{}
	for _, vol := range pod.Spec.Volumes {
		if vol.PersistentVolumeClaim == nil {
			continue
		}
		var pvc *v1.PersistentVolumeClaim
		for _, c := range in.claims {
			if c.Namespace == pod.Namespace && c.Name == vol.PersistentVolumeClaim.ClaimName {
				pvc = c
			}
		}
		if pvc == nil || pvc.Spec.VolumeName != "" {
			continue
		}
		className := storagehelpers.GetPersistentVolumeClaimClass(pvc)
		var class *storagev1.StorageClass
		for _, sc := range in.storage {
			if sc.Name == className {
				class = sc
			}
		}
		if class == nil || class.VolumeBindingMode == nil || *class.VolumeBindingMode != storagev1.VolumeBindingWaitForFirstConsumer {
			continue
		}
		pv, err := storagehelpers.FindMatchingVolume(pvc, in.volumes, node, chosen, true, false)
		if err != nil {
			fail(err)
		}
		if pv == nil {
			if class.Provisioner == "kubernetes.io/no-provisioner" {
				continue
			}
			pv = &v1.PersistentVolume{Spec: v1.PersistentVolumeSpec{
				Capacity:         v1.ResourceList{v1.ResourceStorage: pvc.Spec.Resources.Requests[v1.ResourceStorage]},
				AccessModes:      pvc.Spec.AccessModes,
				StorageClassName: className,
			}}
			pv.Name = "pvc-" + pvc.Namespace + "-" + pvc.Name
			if zone, ok := node.Labels[v1.LabelTopologyZone]; ok && class.Provisioner == "ebs.csi.aws.com" {
				pv.Spec.NodeAffinity = &v1.VolumeNodeAffinity{Required: &v1.NodeSelector{NodeSelectorTerms: []v1.NodeSelectorTerm{{
					MatchExpressions: []v1.NodeSelectorRequirement{{Key: v1.LabelTopologyZone, Operator: v1.NodeSelectorOpIn, Values: []string{zone}}},
				}}}}
			}
			if q, ok := pv.Spec.Capacity[v1.ResourceStorage]; !ok || q.IsZero() {
				pv.Spec.Capacity[v1.ResourceStorage] = resource.MustParse("1Gi")
			}
			in.volumes = append(in.volumes, pv)
		}
		chosen[pv.Name] = pv
		pv.Spec.ClaimRef = &v1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1", Namespace: pvc.Namespace, Name: pvc.Name, UID: pvc.UID}
		pv.Status.Phase = v1.VolumeBound
		pvc.Spec.VolumeName = pv.Name
		if pvc.Annotations == nil {
			pvc.Annotations = map[string]string{}
		}
		pvc.Annotations["pv.kubernetes.io/bind-completed"] = "yes"
		pvc.Status.Phase = v1.ClaimBound
		changed = true
	}
	return changed
}

// scheduleOne mirrors the scheduler's schedulePod / findNodesThatFitPod for one pod, over every node.
func scheduleOne(ctx context.Context, f framework.Framework, snapshot *internalcache.Snapshot, pod *v1.Pod) (string, string, error) {
	if snapshot.NumNodes() == 0 {
		return "", "no nodes available to schedule pods", nil
	}
	state := framework.NewCycleState()
	diagnosis := framework.Diagnosis{NodeToStatus: framework.NewDefaultNodeToStatus()}
	// a FitError runs the PostFilter plugins (DefaultPreemption) and the event carries their message too,
	// as schedule_one.go's ScheduleOne does
	fitError := func() string {
		_, st := f.RunPostFilterPlugins(ctx, state, pod, diagnosis.NodeToStatus)
		diagnosis.PostFilterMsg = st.Message()
		e := &framework.FitError{Pod: pod, NumAllNodes: snapshot.NumNodes(), Diagnosis: diagnosis}
		return e.Error()
	}
	allNodes, err := snapshot.NodeInfos().List()
	if err != nil {
		return "", "", err
	}
	preRes, s, unscheduledPlugins := f.RunPreFilterPlugins(ctx, state, pod)
	diagnosis.UnschedulablePlugins = unscheduledPlugins
	if !s.IsSuccess() {
		if !s.IsRejected() {
			return "", "", s.AsError()
		}
		diagnosis.NodeToStatus.SetAbsentNodesStatus(s)
		diagnosis.PreFilterMsg = s.Message()
		diagnosis.AddPluginStatus(s)
		return "", fitError(), nil
	}
	nodes := allNodes
	if !preRes.AllNodes() {
		nodes = nil
		for _, ni := range allNodes {
			if preRes.NodeNames.Has(ni.Node().Name) {
				nodes = append(nodes, ni)
			}
		}
		diagnosis.NodeToStatus.SetAbsentNodesStatus(fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
			fmt.Sprintf("node(s) didn't satisfy plugin(s) %v", sets.List(unscheduledPlugins))))
	}
	var feasible []fwk.NodeInfo
	for _, ni := range nodes {
		st := f.RunFilterPlugins(ctx, state, pod, ni)
		if st.Code() == fwk.Error {
			return "", "", st.AsError()
		}
		if st.IsSuccess() {
			feasible = append(feasible, ni)
		} else {
			diagnosis.NodeToStatus.Set(ni.Node().Name, st)
			diagnosis.AddPluginStatus(st)
		}
	}
	if len(feasible) == 0 {
		return "", fitError(), nil
	}
	if len(feasible) == 1 {
		return feasible[0].Node().Name, "", nil
	}
	if st := f.RunPreScorePlugins(ctx, state, pod, feasible); !st.IsSuccess() {
		return "", "", st.AsError()
	}
	scores, st := f.RunScorePlugins(ctx, state, pod, feasible)
	if !st.IsSuccess() {
		return "", "", st.AsError()
	}
	if os.Getenv("ORACLE_DEBUG") != "" {
		for _, sc := range scores {
			fmt.Fprintf(os.Stderr, "%s/%s %s total=%d %v\n", pod.Namespace, pod.Name, sc.Name, sc.TotalScore, sc.Scores)
		}
	}
	best := scores[0]
	for _, sc := range scores[1:] {
		if sc.TotalScore > best.TotalScore || (sc.TotalScore == best.TotalScore && sc.Name < best.Name) {
			best = sc
		}
	}
	return best.Name, "", nil
}
