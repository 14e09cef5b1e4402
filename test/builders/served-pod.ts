/**
 * Pods as the API server serves them to a list or watch: a Job's worker with what the
 * Job controller, admission (default tolerations, the service account's token volume)
 * and defaulting (DNS policy, scheduler, pull policy, termination message) add, and for
 * a running one the status the kubelet reports (IPs, start time, QoS class, container
 * IDs and image digests, allocated resources, a last OOMKilled exit). What the trim tests
 * and the heap tests feed an informer, as JSON-ready plain objects (timestamps as RFC 3339
 * text, as on the wire).
 *
 *   servedJobPod(7)                       // gated by tollgate.io/ready, not scheduled
 *   servedJobPod(7, { running: true })    // released, bound to a node, running
 */

export interface ServedPodOptions {
  /** Released, bound and running, with the status a kubelet reports; else gated and pending. */
  readonly running?: boolean;
  readonly namespace?: string;
}

const created = '2026-11-29T07:00:00Z';
const started = '2026-11-29T07:00:05Z';

/** The container both forms share: a trainer with its command, env, mounts and probes. */
function servedWorker(job: string, index: number): Record<string, unknown> {
  return {
    name: 'worker',
    image: 'registry.example/ml/trainer:2.14.1',
    command: ['python', '-m', 'trainer.main'],
    args: ['--epochs=10', `--shard=${index % 100}`],
    env: [
      { name: 'JOB_NAME', value: job },
      {
        name: 'POD_NAME',
        valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.name' } },
      },
    ],
    resources: { requests: { cpu: '500m', memory: '1Gi' }, limits: { cpu: '2', memory: '2Gi' } },
    resizePolicy: [
      { resourceName: 'cpu', restartPolicy: 'NotRequired' },
      { resourceName: 'memory', restartPolicy: 'RestartContainer' },
    ],
    volumeMounts: [
      {
        name: 'kube-api-access-x7k2p',
        readOnly: true,
        mountPath: '/var/run/secrets/kubernetes.io/serviceaccount',
      },
    ],
    readinessProbe: {
      httpGet: { path: '/readyz', port: 8080, scheme: 'HTTP' },
      timeoutSeconds: 1,
      periodSeconds: 10,
      successThreshold: 1,
      failureThreshold: 3,
    },
    terminationMessagePath: '/dev/termination-log',
    terminationMessagePolicy: 'File',
    imagePullPolicy: 'IfNotPresent',
  };
}

/** A log shipper run as a restartable init container (a sidecar). */
function servedSidecar(): Record<string, unknown> {
  return {
    name: 'log-shipper',
    image: 'registry.example/infra/log-shipper:1.3.0',
    restartPolicy: 'Always',
    resources: { requests: { cpu: '10m', memory: '32Mi' } },
    terminationMessagePath: '/dev/termination-log',
    terminationMessagePolicy: 'File',
    imagePullPolicy: 'IfNotPresent',
  };
}

/** The status of one container as the kubelet reports it while it runs. */
function runningStatus(
  name: string,
  image: string,
  resources: Record<string, unknown>,
): Record<string, unknown> {
  return {
    name,
    state: { running: { startedAt: started } },
    lastState: {
      terminated: {
        exitCode: 137,
        reason: 'OOMKilled',
        startedAt: created,
        finishedAt: started,
        containerID: `containerd://${'ab12'.repeat(16)}`,
      },
    },
    ready: true,
    restartCount: 1,
    image,
    imageID: `${image.split(':')[0]}@sha256:${'9f3c'.repeat(16)}`,
    containerID: `containerd://${'cd34'.repeat(16)}`,
    started: true,
    allocatedResources: (resources as { requests?: unknown }).requests,
    resources,
    volumeMounts: [
      {
        name: 'kube-api-access-x7k2p',
        mountPath: '/var/run/secrets/kubernetes.io/serviceaccount',
        readOnly: true,
        recursiveReadOnly: 'Disabled',
      },
    ],
    user: { linux: { uid: 1000, gid: 1000, supplementalGroups: [1000] } },
  };
}

/** Job pod number `index` (of Job `train-<index / 100>`), as a list or watch serves it. */
export function servedJobPod(
  index: number,
  options: ServedPodOptions = {},
): Record<string, unknown> {
  const job = `train-${Math.floor(index / 100)}`;
  const namespace = options.namespace ?? 'ml-batch';
  const name = `${job}-${index}-x7k2p`;
  const worker = servedWorker(job, index);
  const node = `node-${index % 50}`;
  const condition = (type: string, status: string, reason?: string): Record<string, unknown> => ({
    type,
    status,
    observedGeneration: 1,
    lastProbeTime: null,
    lastTransitionTime: options.running ? started : created,
    ...(reason ? { reason } : {}),
  });
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      generateName: `${job}-${index}-`,
      namespace,
      uid: `0b9c3f2e-${String(index).padStart(8, '0')}-4c1d-9a57-1f0e2d3c4b5a`,
      resourceVersion: String(100_000 + index),
      generation: 1,
      creationTimestamp: created,
      labels: {
        'batch.kubernetes.io/controller-uid': '5d1e7a90-3f2b-4c8d-9e6a-7b0c1d2e3f4a',
        'batch.kubernetes.io/job-name': job,
        'batch.kubernetes.io/job-completion-index': String(index % 100),
        'controller-uid': '5d1e7a90-3f2b-4c8d-9e6a-7b0c1d2e3f4a',
        'job-name': job,
        'tollgate.io/tenant': `team-${index % 7}`,
      },
      annotations: {
        'batch.kubernetes.io/job-completion-index': String(index % 100),
        'tollgate.io/gang': job,
      },
      ownerReferences: [
        {
          apiVersion: 'batch/v1',
          kind: 'Job',
          name: job,
          uid: '5d1e7a90-3f2b-4c8d-9e6a-7b0c1d2e3f4a',
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
      finalizers: ['batch.kubernetes.io/job-tracking'],
    },
    spec: {
      volumes: [
        {
          name: 'kube-api-access-x7k2p',
          projected: {
            sources: [
              { serviceAccountToken: { expirationSeconds: 3607, path: 'token' } },
              {
                configMap: {
                  name: 'kube-root-ca.crt',
                  items: [{ key: 'ca.crt', path: 'ca.crt' }],
                },
              },
            ],
            defaultMode: 420,
          },
        },
      ],
      initContainers: [servedSidecar()],
      containers: [worker],
      restartPolicy: 'Never',
      terminationGracePeriodSeconds: 30,
      dnsPolicy: 'ClusterFirst',
      nodeSelector: { 'node.kubernetes.io/pool': 'batch' },
      serviceAccountName: 'default',
      serviceAccount: 'default',
      securityContext: { runAsNonRoot: true },
      hostname: `${job}-${index % 100}`,
      subdomain: job,
      affinity: {
        nodeAffinity: {
          requiredDuringSchedulingIgnoredDuringExecution: {
            nodeSelectorTerms: [
              {
                matchExpressions: [
                  { key: 'kubernetes.io/arch', operator: 'In', values: ['amd64', 'arm64'] },
                ],
              },
            ],
          },
        },
      },
      schedulerName: 'default-scheduler',
      tolerations: [
        {
          key: 'node.kubernetes.io/not-ready',
          operator: 'Exists',
          effect: 'NoExecute',
          tolerationSeconds: 300,
        },
        {
          key: 'node.kubernetes.io/unreachable',
          operator: 'Exists',
          effect: 'NoExecute',
          tolerationSeconds: 300,
        },
      ],
      priority: 0,
      enableServiceLinks: true,
      preemptionPolicy: 'PreemptLowerPriority',
      ...(options.running
        ? { nodeName: node }
        : { schedulingGates: [{ name: 'tollgate.io/ready' }] }),
    },
    status: options.running
      ? {
          observedGeneration: 1,
          phase: 'Running',
          conditions: [
            condition('PodReadyToStartContainers', 'True'),
            condition('Initialized', 'True'),
            condition('Ready', 'True'),
            condition('ContainersReady', 'True'),
            condition('PodScheduled', 'True'),
          ],
          hostIP: `10.0.0.${index % 50}`,
          hostIPs: [{ ip: `10.0.0.${index % 50}` }],
          podIP: `10.244.${Math.floor(index / 250) % 250}.${index % 250}`,
          podIPs: [{ ip: `10.244.${Math.floor(index / 250) % 250}.${index % 250}` }],
          startTime: created,
          initContainerStatuses: [
            runningStatus('log-shipper', 'registry.example/infra/log-shipper:1.3.0', {
              requests: { cpu: '10m', memory: '32Mi' },
            }),
          ],
          containerStatuses: [
            runningStatus(
              'worker',
              'registry.example/ml/trainer:2.14.1',
              worker.resources as Record<string, unknown>,
            ),
          ],
          qosClass: 'Burstable',
        }
      : {
          observedGeneration: 1,
          phase: 'Pending',
          conditions: [condition('PodScheduled', 'False', 'SchedulingGated')].map((c) => ({
            ...c,
            message: 'Scheduling is blocked due to non-empty scheduling gates',
          })),
          qosClass: 'Burstable',
        },
  };
}
