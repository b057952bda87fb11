import { createTestDatabase, type TestDatabase } from "../helpers/db";
import { request, startServices, type TestApi } from "../helpers/broker";

let tdb: TestDatabase;
let app: TestApi;
let app2: TestApi;
beforeAll(async () => {
	tdb = await createTestDatabase();
	app = await startServices(tdb.url, ["api", "errors", "status"]);
	app2 = await startServices(tdb.url, ["api", "errors", "status"], { API_TOKENS: "t1,t2" });
});
afterAll(async () => {
	await app?.stop();
	await app2?.stop();
	await tdb?.drop();
});
it("probe", async () => {
	const show = (r: any) => console.log(r.status, JSON.stringify([...r.headers.entries()]), r.text.slice(0, 300));
	const a = app.api;
	show(await request("GET", `${a}/nope/`));
	show(await request("GET", `http://${new URL(a).host}/nope`));
	show(await request("POST", `${a}/errors/`, "{bad"));
	show(await request("POST", `${a}/errors/`, "[1]"));
	show(await request("POST", `${a}/errors/`, "\"x\""));
	show(await request("POST", `${a}/errors/`, "null"));
	show(await request("POST", `${a}/errors/`, { name: "a", category: "DATA", x: "y".repeat(1100000) }).catch(e => ({ status: String(e), headers: new Map(), text: "" })));
	show(await request("GET", `${a}/errors/0/`));
	show(await request("GET", `${a}/errors/abc/`));
	show(await request("GET", `${a}/errors/99999/`));
	show(await request("POST", `${a}/errors/`, { name: "e1", category: "DATA", title: "x\u0000y" }));
	show(await request("POST", `${a}/v3/errors/`, { name: "e2", category: "DATA" }));
	show(await request("PATCH", `${a}/errors/1/`, { title: "x" }));
	show(await request("GET", `${a}/errors/?` + Array.from({ length: 25 }, (_, i) => `name=n${i}`).join("&")));
	show(await request("GET", `${a}/errors/?page_size=abc`));
	show(await request("GET", `${a}/errors/?page_size=2&order=-name`));
	show(await request("GET", `${a}/status/`));
	show(await request("GET", `${a}/version/`));
	const b = app2.api;
	show(await request("GET", `${b}/errors/`));
	show(await request("POST", `${b}/errors/`, "{bad"));
	show(await request("POST", `${b}/errors/`, { category: 1 }));
	show(await request("GET", `${b}/errors/`, undefined, { Authorization: "Bearer t2" }));
	show(await request("GET", `${b}/nope/`));
});
