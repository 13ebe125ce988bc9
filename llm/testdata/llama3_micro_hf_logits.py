import json, sys, torch, numpy as np
from transformers import AutoModelForCausalLM
d = sys.argv[1]; out = sys.argv[2]
refs = json.load(open(d + "/hf_refs.json"))
for dtype, dev, name in [(torch.float64, "cpu", "f64cpu"), (torch.float32, "cpu", "f32cpu"), (torch.float32, "cuda", "f32gpu")]:
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    m = AutoModelForCausalLM.from_pretrained(d, dtype=dtype, attn_implementation="eager").to(dev).eval()
    rows = []
    for p in refs["prompts"]:
        ids = torch.tensor([p["ids"]], device=dev)
        with torch.no_grad():
            lg = m(ids).logits[0, -1].to(torch.float64).cpu().numpy()
        rows.append(lg)
    np.array(rows, dtype=np.float64).tofile(f"{out}/l3m_{name}.f64")
    print(name, "done")
