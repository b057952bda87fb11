/**
 * The intake of new recipes yields to a process's control loop (the scheduler's report flushes
 * and the passes they wake). A recipe's later jobs wait on the control loop: the transaction
 * that records a job's end queues the jobs it frees, and a pass places them. Under load each of
 * their round trips waits for a cpu, and an intake batch (checking and writing a few dozen
 * recipes) running beside them is what they wait behind. So a batch of new recipes waits until
 * no control work is in flight, at most a given time (so that it is never starved), while the
 * control loop never waits for the intake. docs/decisions.md, "Recipes", has the measurements.
 */
export class IntakeGate {
	/** control work in flight: flushes and passes */
	private control = 0;
	/** intake batches waiting for the control loop to be quiet */
	private waiting: (() => void)[] = [];

	/** Control work (a report flush, a pass) begins. */
	enterControl(): void {
		this.control++;
	}

	/** Control work ends. */
	leaveControl(): void {
		this.control = Math.max(0, this.control - 1);
		if (this.control > 0) return;
		// work that takes over in the same turn of the event loop (the pass a flush woke) keeps
		// the intake waiting
		queueMicrotask(() => {
			if (this.control > 0) return;
			const waiting = this.waiting;
			this.waiting = [];
			for (const go of waiting) go();
		});
	}

	/** Resolves once no control work is in flight, or after `maxWaitMs`. */
	quiet(maxWaitMs: number): Promise<void> {
		if (this.control === 0 || maxWaitMs <= 0) return Promise.resolve();
		return new Promise<void>(resolve => {
			const waiting = this.waiting;
			const timer = setTimeout(go, maxWaitMs);
			function go() {
				clearTimeout(timer);
				const i = waiting.indexOf(go);
				if (i >= 0) waiting.splice(i, 1);
				resolve();
			}
			waiting.push(go);
		});
	}
}

const perBroker = new WeakMap<object, IntakeGate>();

/** The gate of the services of one broker (one process, or one thread of it). */
export function intakeGateOf(broker: object): IntakeGate {
	let gate = perBroker.get(broker);
	if (!gate) {
		gate = new IntakeGate();
		perBroker.set(broker, gate);
	}
	return gate;
}
