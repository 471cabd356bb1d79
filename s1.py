import torch
x=torch.tensor([-2**63, 5]); y=torch.tensor([-1,-1])
print(torch.div(x,y,rounding_mode='floor'))
print(torch.div(x,y,rounding_mode='trunc'))
x=torch.tensor([-2**31, 7],dtype=torch.int32); y=torch.tensor([-1,-2],dtype=torch.int32)
print(x//y)
